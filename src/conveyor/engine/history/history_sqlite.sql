-- The queue history of a SQLite deployment, in its own file `history.db` beside `catalog.db`: the
-- coordinator writes every queue's figures every few seconds, and the catalog must not change that
-- often (every process re-reads its snapshot when the catalog's data_version moves).
-- Version 2 (version 1 had no queue_latest: history_v1_to_v2.sql adds it and fills it from the points).

PRAGMA application_id = 1131376246;  -- 'Conv': marks the file as Conveyor's
PRAGMA user_version = 2;
CREATE TABLE queue_history (
    queue_id      TEXT NOT NULL,
    queue_name    TEXT NOT NULL,     -- the qualified name, ACCOUNT/NAME
    at_ms         INTEGER NOT NULL,
    backlog       INTEGER NOT NULL,
    backlog_bytes INTEGER NOT NULL,
    oldest_ms     INTEGER NOT NULL,  -- the oldest stored message's timestamp, 0 when empty
    in_flight     INTEGER NOT NULL,
    sent          INTEGER NOT NULL,  -- lifetime counters: rates are differences of two rows
    acked         INTEGER NOT NULL,
    retried       INTEGER NOT NULL,
    dead_lettered INTEGER NOT NULL,
    concurrency   INTEGER NOT NULL,  -- batches the live workers run at once on the queue
    PRIMARY KEY (queue_name, at_ms)
) WITHOUT ROWID;
CREATE INDEX queue_history_at ON queue_history (at_ms);

-- Each queue's newest point and the one before it (p_ columns, NULL when it has one point), kept by
-- the recorder in the transaction that records the points and pruned with them: the overview ranks
-- every queue of an account by one range read of this table instead of a seek a queue.
CREATE TABLE queue_latest (
    queue_id        TEXT NOT NULL,
    queue_name      TEXT NOT NULL,
    at_ms           INTEGER NOT NULL,
    backlog         INTEGER NOT NULL,
    backlog_bytes   INTEGER NOT NULL,
    oldest_ms       INTEGER NOT NULL,
    in_flight       INTEGER NOT NULL,
    sent            INTEGER NOT NULL,
    acked           INTEGER NOT NULL,
    retried         INTEGER NOT NULL,
    dead_lettered   INTEGER NOT NULL,
    concurrency     INTEGER NOT NULL,
    p_queue_id      TEXT,
    p_at_ms         INTEGER,
    p_backlog       INTEGER,
    p_backlog_bytes INTEGER,
    p_oldest_ms     INTEGER,
    p_in_flight     INTEGER,
    p_sent          INTEGER,
    p_acked         INTEGER,
    p_retried       INTEGER,
    p_dead_lettered INTEGER,
    p_concurrency   INTEGER,
    PRIMARY KEY (queue_name)
) WITHOUT ROWID;
