-- The message state transitions of one shard file. Parameters named :x; lists of sequence numbers
-- arrive as a JSON array (:seqs) and are expanded with json_each.

-- name: insert
INSERT INTO messages (id, timestamp_ms, visible_at_ms, attempts, content_type, body)
VALUES (?, ?, ?, ?, ?, ?);

-- name: insert_moved
-- A message moved in from another queue (dead-lettered or redriven): it keeps its older timestamp,
-- so it is marked for the `oldest` query's partial index.
INSERT INTO messages (id, timestamp_ms, visible_at_ms, attempts, content_type, body, moved)
VALUES (?, ?, ?, ?, ?, ?, 1);

-- name: count_in
UPDATE stats SET backlog_count = backlog_count + :n, backlog_bytes = backlog_bytes + :bytes,
                 sent = sent + :sent
WHERE deleted = 0
RETURNING backlog_count, backlog_bytes;

-- name: count_out
UPDATE stats SET backlog_count = backlog_count - :n, backlog_bytes = backlog_bytes - :bytes,
                 acked = acked + :acked, dead_lettered = dead_lettered + :dead_lettered,
                 dropped = dropped + :dropped, expired = expired + :expired;

-- name: count_retried
UPDATE stats SET retried = retried + :n;

-- name: is_deleted
SELECT deleted FROM stats;

-- name: mark_deleted
UPDATE stats SET deleted = 1;

-- name: oldest
-- Sent messages arrive in timestamp order, so the first by seq is the oldest of them; moved ones
-- are found through their partial index. Both lookups are O(log n).
SELECT min(t) FROM (
    SELECT timestamp_ms AS t FROM (SELECT timestamp_ms FROM messages ORDER BY seq LIMIT 1)
    UNION ALL
    SELECT min(timestamp_ms) FROM messages WHERE moved = 1
);

-- name: lease
UPDATE messages SET visible_at_ms = :until, attempts = attempts + 1, lease = :token
WHERE seq IN (SELECT seq FROM messages WHERE visible_at_ms <= :now ORDER BY visible_at_ms LIMIT :n)
RETURNING seq, id, timestamp_ms, content_type, body, attempts;

-- name: ack
DELETE FROM messages WHERE lease = :token AND seq IN (SELECT value FROM json_each(:seqs))
RETURNING seq, length(body);

-- name: retry
UPDATE messages SET visible_at_ms = :visible_at, lease = NULL
WHERE lease = :token AND attempts < :max_deliveries AND seq IN (SELECT value FROM json_each(:seqs))
RETURNING seq;

-- name: take_leased
DELETE FROM messages WHERE lease = :token AND seq IN (SELECT value FROM json_each(:seqs))
RETURNING seq, id, timestamp_ms, content_type, body;

-- name: release
UPDATE messages SET visible_at_ms = :now, attempts = max(attempts - 1, 0), lease = NULL
WHERE lease = :token AND seq IN (SELECT value FROM json_each(:seqs));

-- name: extend
UPDATE messages SET visible_at_ms = :until
WHERE lease = :token AND seq IN (SELECT value FROM json_each(:seqs));

-- name: lease_of
SELECT seq, lease FROM messages WHERE seq IN (SELECT value FROM json_each(:seqs));

-- name: purge
DELETE FROM messages;

-- name: purge_counts
UPDATE stats SET backlog_count = 0, backlog_bytes = 0;

-- name: peek
SELECT seq, id, timestamp_ms, content_type, body, attempts FROM messages
ORDER BY visible_at_ms LIMIT :n;

-- name: oldest_rows
SELECT seq, id, timestamp_ms, content_type, body FROM messages ORDER BY seq LIMIT :n;

-- name: remove
DELETE FROM messages WHERE seq IN (SELECT value FROM json_each(:seqs)) RETURNING length(body);

-- name: next_visible
SELECT min(visible_at_ms) FROM messages;

-- name: in_flight
SELECT count(*) FROM messages WHERE lease IS NOT NULL AND visible_at_ms > :now;

-- name: expire
DELETE FROM messages WHERE timestamp_ms < :cutoff RETURNING length(body);

-- name: stats
SELECT backlog_count, backlog_bytes, sent, acked, retried, dead_lettered, expired, dropped FROM stats;
