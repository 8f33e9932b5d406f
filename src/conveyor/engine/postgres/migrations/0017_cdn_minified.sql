-- Version 17: a minified output of the package CDN names its original and the minifier that made it
-- (conveyor.cdn; SQLite's cdn.db has the same columns, cdn/sqlite_schema.sql version 2).
ALTER TABLE cdn_files ADD COLUMN source text;
ALTER TABLE cdn_files ADD COLUMN tool text;
ALTER TABLE cdn_files ADD COLUMN tool_version text;
