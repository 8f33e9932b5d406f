-- The Super Slurper's tables in a SQLite deployment's slurper.db (version 1). PostgreSQL has the
-- same tables in migration 0012_slurper.sql; both run the named queries of queries.sql.
PRAGMA application_id = 1131376246;  -- 'Conv': marks the file as Conveyor's
PRAGMA user_version = 1;

-- A migration job. source/target are the checked specs as JSON, secrets included (never returned).
-- next_listing: the sequence number of the listing to run next; listing_after: where it starts
-- (the last key the previous listing recorded); lifecycle_tick: the lifecycle message expected next.
CREATE TABLE slurper_jobs (
    id TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    finished_ms INTEGER,
    status TEXT NOT NULL,
    overwrite INTEGER NOT NULL,
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    objects INTEGER NOT NULL DEFAULT 0,
    transferred INTEGER NOT NULL DEFAULT 0,
    skipped INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    bytes_listed INTEGER NOT NULL DEFAULT 0,
    bytes_transferred INTEGER NOT NULL DEFAULT 0,
    next_listing INTEGER NOT NULL DEFAULT 0,
    listing_after TEXT NOT NULL DEFAULT '',
    listing_done INTEGER NOT NULL DEFAULT 0,
    lifecycle_tick INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX slurper_jobs_by_account ON slurper_jobs (account, created_ms);

-- Every listed key of a job: pending (listed, not started), locked (a transfer holds it: owner is
-- its message id), then transferred, skipped or failed.
CREATE TABLE slurper_keys (
    job_id TEXT NOT NULL,
    key TEXT NOT NULL,
    listing INTEGER NOT NULL,
    size INTEGER NOT NULL,
    etag TEXT NOT NULL,
    storage_class TEXT NOT NULL,
    state TEXT NOT NULL,
    owner TEXT,
    PRIMARY KEY (job_id, key)
);
CREATE INDEX slurper_keys_by_listing ON slurper_keys (job_id, listing, state);

CREATE TABLE slurper_logs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    log_type TEXT NOT NULL,
    message TEXT NOT NULL,
    object_key TEXT
);
CREATE INDEX slurper_logs_by_job ON slurper_logs (job_id, id);
