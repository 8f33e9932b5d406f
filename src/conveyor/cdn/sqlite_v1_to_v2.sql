-- cdn.db version 1 -> 2: a minified output names its original and the minifier that made it.
ALTER TABLE cdn_files ADD COLUMN source TEXT;
ALTER TABLE cdn_files ADD COLUMN tool TEXT;
ALTER TABLE cdn_files ADD COLUMN tool_version TEXT;
