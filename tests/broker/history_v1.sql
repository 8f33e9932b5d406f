-- The queue history of a SQLite deployment, in its own file `history.db` beside `catalog.db`: the
-- coordinator writes every queue's figures every few seconds, and the catalog must not change that
-- often (every process re-reads its snapshot when the catalog's data_version moves).
-- history.db as version 1 made it (no queue_latest): the upgrade test opens such a file.

PRAGMA application_id = 1131376246;  -- 'Conv': marks the file as Conveyor's
PRAGMA user_version = 1;
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
