-- A storage shard as version 1 of Conveyor wrote it (one row per message), for the upgrade test.
-- One storage shard: the messages of one queue that landed in this file.
PRAGMA application_id = 1131376246;  -- 'Conv'
PRAGMA user_version = 1;

-- `visible_at_ms` is when the message can next be delivered: the send time plus its delay, the end
-- of its current lease, or the end of its retry delay. `lease` is the token of the latest delivery
-- (NULL before the first and after a retry); `attempts` counts deliveries started.
CREATE TABLE IF NOT EXISTS messages (
    seq           INTEGER PRIMARY KEY,
    id            TEXT NOT NULL,
    timestamp_ms  INTEGER NOT NULL,
    visible_at_ms INTEGER NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    lease         INTEGER,
    content_type  TEXT NOT NULL,
    body          BLOB NOT NULL,
    moved         INTEGER NOT NULL DEFAULT 0  -- 1: dead-lettered or redriven in, with an older timestamp
);
CREATE INDEX IF NOT EXISTS messages_visible ON messages (visible_at_ms);
CREATE INDEX IF NOT EXISTS messages_moved ON messages (timestamp_ms) WHERE moved = 1;

-- One row of running totals, kept in the same transactions as the messages they count.
CREATE TABLE IF NOT EXISTS stats (
    one           INTEGER PRIMARY KEY CHECK (one = 1),
    backlog_count INTEGER NOT NULL DEFAULT 0,
    backlog_bytes INTEGER NOT NULL DEFAULT 0,
    sent          INTEGER NOT NULL DEFAULT 0,
    acked         INTEGER NOT NULL DEFAULT 0,
    retried       INTEGER NOT NULL DEFAULT 0,
    dead_lettered INTEGER NOT NULL DEFAULT 0,
    expired       INTEGER NOT NULL DEFAULT 0,
    dropped       INTEGER NOT NULL DEFAULT 0,
    deleted       INTEGER NOT NULL DEFAULT 0  -- 1 once the queue is deleted: writers must stop
);
INSERT OR IGNORE INTO stats (one) VALUES (1);
