-- storage.db version 2: a small object of a local bucket keeps its bytes in its row (one flushed
-- commit stores it, one read returns it); NULL for an object whose bytes are a file or in S3.
ALTER TABLE storage_objects ADD COLUMN data BLOB;
PRAGMA user_version = 2;
