-- What any of Conveyor's SQLite files is asked before it is trusted (storage.py, doctor.py).

-- name: identity
-- The file's application id, schema version and table count, read in one statement, so from one
-- snapshot: read apart, another process could commit the schema in between, and a file being
-- initialised would look like another program's.
SELECT (SELECT application_id FROM pragma_application_id()), (SELECT user_version FROM pragma_user_version()),
       (SELECT count(*) FROM sqlite_schema);
