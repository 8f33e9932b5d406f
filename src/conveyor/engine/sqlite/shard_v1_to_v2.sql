-- Shard files of version 1 kept a message in one row, body and delivery state together. Version 2
-- splits each into its payload and its state (shard.sql). Runs in the transaction that opens the
-- file, so a crash leaves the file as it was.
CREATE TABLE payloads (
    seq          INTEGER PRIMARY KEY,
    id           TEXT NOT NULL,
    timestamp_ms INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    body         BLOB NOT NULL,
    moved        INTEGER NOT NULL DEFAULT 0
);
INSERT INTO payloads (seq, id, timestamp_ms, content_type, body, moved)
SELECT seq, id, timestamp_ms, content_type, body, moved FROM messages;
CREATE TABLE states (
    seq           INTEGER PRIMARY KEY,
    visible_at_ms INTEGER NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    lease         INTEGER,
    size          INTEGER NOT NULL
);
INSERT INTO states (seq, visible_at_ms, attempts, lease, size)
SELECT seq, visible_at_ms, attempts, lease, length(body) FROM messages;
DROP TABLE messages;
ALTER TABLE states RENAME TO messages;
CREATE INDEX payloads_moved ON payloads (timestamp_ms) WHERE moved = 1;

-- The oldest stored message's timestamp (NULL when there is none). Sent messages arrive in timestamp
-- order, so the first by seq is the oldest of them; moved ones are found through their partial
-- index. Both lookups are O(log n).
CREATE VIEW oldest_payload (timestamp_ms) AS SELECT min(t) FROM (
    SELECT timestamp_ms AS t FROM (SELECT timestamp_ms FROM payloads ORDER BY seq LIMIT 1)
    UNION ALL
    SELECT min(timestamp_ms) FROM payloads WHERE moved = 1
);
CREATE INDEX messages_visible ON messages (visible_at_ms);
CREATE TRIGGER messages_gone AFTER DELETE ON messages BEGIN
    DELETE FROM payloads WHERE seq = old.seq;
END;
PRAGMA user_version = 2;
