-- A storage shard as version 3 of Conveyor wrote it (every message indexed by time, lone sends counted
-- on read), for the upgrade test.
-- One storage shard: the messages of one queue that landed in this file.
PRAGMA application_id = 1131376246;  -- 'Conv'
PRAGMA user_version = 3;

-- A message is two rows with the same `seq`: its payload, written once when it is stored, and its
-- delivery state, a row of a few integers that every lease, renewal and retry rewrites. Kept apart,
-- a lease rewrites a page of some hundred states instead of the pages of a hundred 1 KB bodies
-- (which halved the consume rate). Deleting the state deletes the payload (messages_gone).

CREATE TABLE IF NOT EXISTS payloads (
    seq          INTEGER PRIMARY KEY,
    id           TEXT NOT NULL,
    timestamp_ms INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    body         BLOB NOT NULL,
    moved        INTEGER NOT NULL DEFAULT 0  -- 1: dead-lettered or redriven in, with an older timestamp
);
CREATE INDEX IF NOT EXISTS payloads_moved ON payloads (timestamp_ms) WHERE moved = 1;

-- The oldest stored message's timestamp (NULL when there is none). Sent messages arrive in timestamp
-- order, so the first by seq is the oldest of them; moved ones are found through their partial
-- index. Both lookups are O(log n).
CREATE VIEW IF NOT EXISTS oldest_payload (timestamp_ms) AS SELECT min(t) FROM (
    SELECT timestamp_ms AS t FROM (SELECT timestamp_ms FROM payloads ORDER BY seq LIMIT 1)
    UNION ALL
    SELECT min(timestamp_ms) FROM payloads WHERE moved = 1
);

-- `visible_at_ms` is when the message can next be delivered: the send time plus its delay, the end
-- of its current lease, or the end of its retry delay. `lease` is the token of the latest delivery
-- (NULL before the first and after a retry); `attempts` counts deliveries started; `size` is the
-- body's length, for the backlog's byte count.
CREATE TABLE IF NOT EXISTS messages (
    seq           INTEGER PRIMARY KEY,
    visible_at_ms INTEGER NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    lease         INTEGER,
    size          INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_visible ON messages (visible_at_ms);

CREATE TRIGGER IF NOT EXISTS messages_gone AFTER DELETE ON messages BEGIN
    DELETE FROM payloads WHERE seq = old.seq;
END;

-- One row of running totals, kept in the same transactions as the messages they count. A lone send
-- does not write it (one page fewer in its commit): the messages with a seq past `counted_through`
-- are sends not yet counted, added to `backlog_count`, `backlog_bytes` and `sent` by whoever reads
-- them, and folded into the row every few dozen sends, by a batch's count, and before anything
-- deletes a message. Every delete leaves `counted_through` at the largest seq still stored, since
-- SQLite gives the next row the largest seq + 1 and so reuses the seqs of deleted rows at the top.
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
    deleted       INTEGER NOT NULL DEFAULT 0, -- 1 once the queue is deleted: writers must stop
    counted_through INTEGER NOT NULL DEFAULT 0  -- the largest seq counted in the row (see above)
);
INSERT OR IGNORE INTO stats (one) VALUES (1);
