-- Version 8: the storage catalog (conveyor.storage): buckets, object metadata, notification and
-- lifecycle rules, and the notification outbox. The same tables as SQLite's storage.db
-- (src/conveyor/storage/storage_sqlite.sql); keep the two in step.
CREATE TABLE storage_buckets (
    account           text NOT NULL,
    name              text NOT NULL,
    location          text NOT NULL,
    url               text NOT NULL,
    endpoint          text NOT NULL,
    region            text NOT NULL,
    access_key_id     text NOT NULL,
    secret_access_key text NOT NULL,
    created_ms        bigint NOT NULL,
    PRIMARY KEY (account, name)
);

CREATE TABLE storage_objects (
    account      text NOT NULL,
    bucket       text NOT NULL,
    key          text COLLATE "C" NOT NULL,
    size         bigint NOT NULL,
    etag         text NOT NULL,
    sha256       text NOT NULL,
    content_type text NOT NULL,
    metadata     text NOT NULL,
    uploaded_ms  bigint NOT NULL,
    PRIMARY KEY (account, bucket, key)
);

CREATE TABLE storage_notification_rules (
    rule_id     text PRIMARY KEY,
    account     text NOT NULL,
    bucket      text NOT NULL,
    queue_id    text NOT NULL,
    queue_name  text NOT NULL,
    actions     text NOT NULL,
    prefix      text NOT NULL,
    suffix      text NOT NULL,
    description text NOT NULL,
    created_ms  bigint NOT NULL
);
CREATE INDEX storage_notification_rules_by_bucket ON storage_notification_rules (account, bucket);

CREATE TABLE storage_lifecycle_rules (
    rule_id         text PRIMARY KEY,
    account         text NOT NULL,
    bucket          text NOT NULL,
    prefix          text NOT NULL,
    max_age_seconds bigint NOT NULL,
    created_ms      bigint NOT NULL
);
CREATE INDEX storage_lifecycle_rules_by_bucket ON storage_lifecycle_rules (account, bucket);

CREATE TABLE storage_outbox (
    event_id   text PRIMARY KEY,
    account    text NOT NULL,
    queue_id   text NOT NULL,
    body       text NOT NULL,
    created_ms bigint NOT NULL
);
CREATE INDEX storage_outbox_by_age ON storage_outbox (created_ms);
