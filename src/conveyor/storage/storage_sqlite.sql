-- storage.db of a SQLite deployment, schema version 2 (storage_v1_to_v2.sql upgrades a version 1 file).
PRAGMA application_id = 1131376246;  -- 'Conv': marks the file as Conveyor's
PRAGMA user_version = 2;

-- The storage catalog: buckets, each object's metadata, notification and lifecycle rules, and the
-- outbox of notifications not yet sent. The same tables on SQLite (storage.db) and PostgreSQL
-- (engine/postgres/migrations/0008_storage.sql, 0013_inline_objects.sql); keep the two in step.
CREATE TABLE storage_buckets (
    account           TEXT NOT NULL,
    name              TEXT NOT NULL,
    location          TEXT NOT NULL,          -- 'local' (a directory of the deployment), 'file' or 's3'
    url               TEXT NOT NULL,          -- s3://bucket/prefix or file:///dir; '' for 'local'
    endpoint          TEXT NOT NULL,
    region            TEXT NOT NULL,
    access_key_id     TEXT NOT NULL,
    secret_access_key TEXT NOT NULL,          -- never returned by the API, never logged
    created_ms        BIGINT NOT NULL,
    PRIMARY KEY (account, name)
);

CREATE TABLE storage_objects (
    account      TEXT NOT NULL,
    bucket       TEXT NOT NULL,
    key          TEXT NOT NULL,
    size         BIGINT NOT NULL,
    etag         TEXT NOT NULL,
    sha256       TEXT NOT NULL,
    content_type TEXT NOT NULL,
    metadata     TEXT NOT NULL,               -- JSON object of custom metadata
    uploaded_ms  BIGINT NOT NULL,
    data         BLOB,                        -- a small object's bytes, kept here instead of a file
    PRIMARY KEY (account, bucket, key)
);

CREATE TABLE storage_notification_rules (
    rule_id     TEXT PRIMARY KEY,
    account     TEXT NOT NULL,
    bucket      TEXT NOT NULL,
    queue_id    TEXT NOT NULL,
    queue_name  TEXT NOT NULL,
    actions     TEXT NOT NULL,                -- JSON list of action names
    prefix      TEXT NOT NULL,
    suffix      TEXT NOT NULL,
    description TEXT NOT NULL,
    created_ms  BIGINT NOT NULL
);
CREATE INDEX storage_notification_rules_by_bucket ON storage_notification_rules (account, bucket);

CREATE TABLE storage_lifecycle_rules (
    rule_id         TEXT PRIMARY KEY,
    account         TEXT NOT NULL,
    bucket          TEXT NOT NULL,
    prefix          TEXT NOT NULL,
    max_age_seconds BIGINT NOT NULL,
    created_ms      BIGINT NOT NULL
);
CREATE INDEX storage_lifecycle_rules_by_bucket ON storage_lifecycle_rules (account, bucket);

-- A notification is written here in the transaction of the write it reports, sent to its queue
-- after the commit and then deleted; the coordinator sends what a crash left behind.
CREATE TABLE storage_outbox (
    event_id   TEXT PRIMARY KEY,
    account    TEXT NOT NULL,
    queue_id   TEXT NOT NULL,
    body       TEXT NOT NULL,                 -- the JSON message body
    created_ms BIGINT NOT NULL
);
CREATE INDEX storage_outbox_by_age ON storage_outbox (created_ms);
