-- The storage catalog's version 2 (storage_sqlite.sql): an object row may hold the object's bytes.
-- A PostgreSQL deployment's buckets are S3-compatible or shared directories, whose bytes stay there,
-- so the column stays NULL here; it exists so that both engines run the same queries.
ALTER TABLE storage_objects ADD COLUMN data bytea;
