-- Version 12: Super Slurper's tables (conveyor.slurper; SQLite keeps the same tables in slurper.db,
-- slurper/sqlite_schema.sql; both run slurper/queries.sql). Keys compare byte-wise (COLLATE "C").
CREATE TABLE slurper_jobs (
    id text PRIMARY KEY,
    account text NOT NULL,
    created_ms bigint NOT NULL,
    finished_ms bigint,
    status text NOT NULL,
    overwrite integer NOT NULL,
    source text NOT NULL,
    target text NOT NULL,
    objects bigint NOT NULL DEFAULT 0,
    transferred bigint NOT NULL DEFAULT 0,
    skipped bigint NOT NULL DEFAULT 0,
    failed bigint NOT NULL DEFAULT 0,
    bytes_listed bigint NOT NULL DEFAULT 0,
    bytes_transferred bigint NOT NULL DEFAULT 0,
    next_listing bigint NOT NULL DEFAULT 0,
    listing_after text COLLATE "C" NOT NULL DEFAULT '',
    listing_done integer NOT NULL DEFAULT 0,
    lifecycle_tick bigint NOT NULL DEFAULT 0
);
CREATE INDEX slurper_jobs_by_account ON slurper_jobs (account, created_ms);
CREATE TABLE slurper_keys (
    job_id text NOT NULL,
    key text COLLATE "C" NOT NULL,
    listing bigint NOT NULL,
    size bigint NOT NULL,
    etag text NOT NULL,
    storage_class text NOT NULL,
    state text NOT NULL,
    owner text,
    PRIMARY KEY (job_id, key)
);
CREATE INDEX slurper_keys_by_listing ON slurper_keys (job_id, listing, state);
CREATE TABLE slurper_logs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id text NOT NULL,
    created_ms bigint NOT NULL,
    log_type text NOT NULL,
    message text NOT NULL,
    object_key text
);
CREATE INDEX slurper_logs_by_job ON slurper_logs (job_id, id);
