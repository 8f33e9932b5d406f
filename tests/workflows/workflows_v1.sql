-- workflows.db as schema version 1 made it (a copy kept for the upgrade test: the schema file may change).
PRAGMA application_id = 1131376246;  -- 'Conv': marks the file as Conveyor's
PRAGMA user_version = 1;
-- Times are milliseconds since the epoch; params, outputs, errors, attempts and configs JSON text.
CREATE TABLE workflows (
    account              TEXT NOT NULL,
    name                 TEXT NOT NULL,
    settings             TEXT NOT NULL,
    version_id           TEXT NOT NULL,
    success_retention_ms INTEGER NOT NULL,
    error_retention_ms   INTEGER NOT NULL,
    created_ms           INTEGER NOT NULL,
    modified_ms          INTEGER NOT NULL,
    PRIMARY KEY (account, name)
);
-- Every id an instance ever had, kept after delete and pruning: ids are never reused.
CREATE TABLE workflow_instance_ids (
    account  TEXT NOT NULL,
    workflow TEXT NOT NULL,
    id       TEXT NOT NULL,
    PRIMARY KEY (account, workflow, id)
);
CREATE TABLE workflow_instances (
    account       TEXT NOT NULL,
    workflow      TEXT NOT NULL,
    id            TEXT NOT NULL,
    status        TEXT NOT NULL,
    params        TEXT NOT NULL,
    output        TEXT,
    error         TEXT,
    trace_id      TEXT NOT NULL,
    version_id    TEXT NOT NULL,
    epoch         INTEGER NOT NULL,
    run_message   TEXT,
    wake_at_ms    INTEGER,
    waiting_for   TEXT,
    paused_at_ms  INTEGER,
    resume_status TEXT,
    created_ms    INTEGER NOT NULL,
    modified_ms   INTEGER NOT NULL,
    started_ms    INTEGER,
    ended_ms      INTEGER,
    PRIMARY KEY (account, workflow, id)
);
CREATE INDEX workflow_instances_by_created ON workflow_instances (account, workflow, created_ms, id);
CREATE INDEX workflow_instances_by_end ON workflow_instances (ended_ms) WHERE ended_ms IS NOT NULL;
CREATE TABLE workflow_steps (
    account    TEXT NOT NULL,
    workflow   TEXT NOT NULL,
    instance   TEXT NOT NULL,
    key        TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    type       TEXT NOT NULL,
    name       TEXT NOT NULL,
    status     TEXT NOT NULL,
    output     TEXT,
    attempts   TEXT NOT NULL,
    config     TEXT NOT NULL,
    start_ms   INTEGER NOT NULL,
    end_ms     INTEGER,
    PRIMARY KEY (account, workflow, instance, key)
);
CREATE TABLE workflow_events (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    account      TEXT NOT NULL,
    workflow     TEXT NOT NULL,
    instance     TEXT NOT NULL,
    type         TEXT NOT NULL,
    payload      TEXT NOT NULL,
    timestamp_ms INTEGER NOT NULL,
    consumed_by  TEXT
);
CREATE INDEX workflow_events_waiting ON workflow_events (account, workflow, instance, type, seq)
    WHERE consumed_by IS NULL;
