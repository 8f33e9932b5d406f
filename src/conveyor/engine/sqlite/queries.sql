-- The message state transitions of one shard file (shard.sql: a message is a payload row and a
-- state row). Parameters named :x; lists of sequence numbers arrive as a JSON array (:seqs) and are
-- expanded with json_each. Deleting a state row deletes its payload (the messages_gone trigger).

-- name: insert_payload
INSERT INTO payloads (id, timestamp_ms, content_type, body) VALUES (?, ?, ?, ?);

-- name: insert_moved_payload
-- A message moved in from another queue (dead-lettered or redriven) keeps its older timestamp, so
-- it is marked for the partial index of the oldest_payload view (shard.sql).
INSERT INTO payloads (id, timestamp_ms, content_type, body, moved) VALUES (?, ?, ?, ?, 1);

-- name: insert_states
-- The state rows of the payloads just stored from :first on, all visible at :visible_at (a batch's
-- usual case: one statement instead of a hundred). Those deliverable when sent are fresh (shard.sql).
INSERT INTO messages (seq, visible_at_ms, size, fresh)
SELECT seq, :visible_at, length(body), :visible_at <= timestamp_ms AND moved = 0 FROM payloads WHERE seq >= :first;

-- name: insert_states_each
-- The same, each visible at its own time: :visible_at is a JSON array, one time per payload.
INSERT INTO messages (seq, visible_at_ms, size, fresh)
SELECT p.seq, j.value, length(p.body), j.value <= p.timestamp_ms AND p.moved = 0
FROM json_each(:visible_at) j CROSS JOIN payloads p ON p.seq = :first + j.key;

-- name: insert_state
-- One message's state row, for the payload just stored as :seq (a lone send: no scan of payloads);
-- :fresh when it is deliverable at once.
INSERT INTO messages (seq, visible_at_ms, size, fresh) VALUES (:seq, :visible_at, :size, :fresh);

-- name: lone_send_view
-- A lone send as one autocommitted statement (Shard._insert_alone): an INSERT into this view of the
-- write connection's own (TEMP: nothing in the file, which older code opens unchanged) runs the
-- trigger below, which stores the payload and its state row in the statement's own transaction.
CREATE TEMP VIEW IF NOT EXISTS lone_send (id, timestamp_ms, content_type, body, visible_at_ms, data_version)
AS SELECT NULL, NULL, NULL, NULL, NULL, NULL WHERE 0;

-- name: lone_send_trigger
-- Refuses, changing nothing, when another connection committed to the file since the data_version
-- the caller gives (read under the previous lone send's write lock): the caller's counts would be
-- stale, and it stores the message the long way instead, which also refuses a deleted queue (a
-- queue is deleted by a commit, so `stats.deleted` cannot have changed unseen; reading it here cost
-- 2 µs of a 15 µs statement). Then the payload, and its state by the payload's rowid: fresh, out of
-- the time index, when deliverable at once.
-- (A TEMP trigger names the main tables unqualified, as SQLite requires.)
CREATE TEMP TRIGGER IF NOT EXISTS lone_send_stores INSTEAD OF INSERT ON lone_send BEGIN
    SELECT RAISE(ABORT, 'conveyor: the shard changed') FROM pragma_data_version
    WHERE data_version IS NOT new.data_version;
    INSERT INTO payloads (id, timestamp_ms, content_type, body)
    VALUES (new.id, new.timestamp_ms, new.content_type, new.body);
    INSERT INTO messages (seq, visible_at_ms, size, fresh)
    VALUES (last_insert_rowid(), new.visible_at_ms, length(new.body), new.visible_at_ms <= new.timestamp_ms);
END;

-- name: lone_send
INSERT INTO lone_send (id, timestamp_ms, content_type, body, visible_at_ms, data_version) VALUES (?, ?, ?, ?, ?, ?);

-- name: stored_metrics
-- After a lone send's rows are stored, read without writing the `stats` row: the backlog count and
-- bytes with the sends not yet counted (shard.sql), the oldest timestamp, which now includes this
-- send, how many sends wait to be folded in, and whether the queue was deleted (the caller's
-- transaction is then rolled back).
-- (A join, not a subquery of the uncounted rows: half the time.)
SELECT s.backlog_count + count(m.seq), s.backlog_bytes + coalesce(sum(m.size), 0),
       (SELECT timestamp_ms FROM oldest_payload), count(m.seq), s.deleted
FROM stats s LEFT JOIN messages m ON m.seq > s.counted_through;

-- name: fold
-- Count the sends past `counted_through` into the row (none: the row is not written). Before any
-- delete, so that what is deleted was counted, and every few dozen lone sends.
UPDATE stats SET (backlog_count, backlog_bytes, sent, counted_through) = (
    SELECT stats.backlog_count + count(*), stats.backlog_bytes + coalesce(sum(size), 0),
           stats.sent + count(*), max(seq)
    FROM messages WHERE seq > stats.counted_through)
WHERE EXISTS (SELECT 1 FROM messages WHERE seq > stats.counted_through);

-- name: count_in
-- A batch's counts, with the sends not yet counted folded in: also the seq the next stored payload
-- gets, and the oldest timestamp before this store. The batch's rows are counted as they are stored.
UPDATE stats SET (backlog_count, backlog_bytes, sent, counted_through) = (
    SELECT stats.backlog_count + :n + count(m.seq), stats.backlog_bytes + :bytes + coalesce(sum(m.size), 0),
           stats.sent + :sent + count(m.seq), (SELECT coalesce(max(seq), 0) FROM payloads) + :n
    FROM messages m WHERE m.seq > stats.counted_through)
WHERE deleted = 0
RETURNING backlog_count, backlog_bytes, (SELECT coalesce(max(seq), 0) + 1 FROM payloads),
          (SELECT timestamp_ms FROM oldest_payload);

-- name: count_out
-- After a delete (which a fold preceded): the seqs it freed at the top will be given again, so the
-- marks come down to the largest seq left (and the one after it).
UPDATE stats SET backlog_count = backlog_count - :n, backlog_bytes = backlog_bytes - :bytes,
                 acked = acked + :acked, dead_lettered = dead_lettered + :dead_lettered,
                 dropped = dropped + :dropped, expired = expired + :expired,
                 (counted_through, fresh_from) = (SELECT coalesce(max(seq), 0), min(fresh_from, coalesce(max(seq), 0) + 1)
                                                  FROM payloads);

-- name: count_retried
UPDATE stats SET retried = retried + :n;

-- name: is_deleted
SELECT deleted FROM stats;

-- name: mark_deleted
UPDATE stats SET deleted = 1;

-- name: oldest
SELECT timestamp_ms FROM oldest_payload;

-- name: lease
-- The :n deliverable messages with the earliest times: from the index (messages delivered before,
-- delayed or moved in) and the fresh ones by seq (shard.sql). What it takes is no longer fresh.
UPDATE messages SET visible_at_ms = :until, attempts = attempts + 1, lease = :token, fresh = 0
WHERE seq IN (SELECT seq FROM (
    SELECT * FROM (SELECT seq, visible_at_ms FROM messages WHERE fresh = 0 AND visible_at_ms <= :now
                   ORDER BY visible_at_ms LIMIT :n)
    UNION ALL
    SELECT * FROM (SELECT seq, visible_at_ms FROM messages
                   WHERE seq >= (SELECT fresh_from FROM stats) AND fresh = 1 AND visible_at_ms <= :now
                   ORDER BY seq LIMIT :n)
    ORDER BY visible_at_ms, seq LIMIT :n))
RETURNING seq, attempts;

-- name: advance_fresh
-- After a lease: `fresh_from` moves up to the first fresh message left (none: the next seq), over
-- the ones the lease took. Not written when it stays.
UPDATE stats SET fresh_from = next.seq FROM (
    SELECT coalesce((SELECT m.seq FROM messages m WHERE m.seq >= s.fresh_from AND m.fresh = 1 ORDER BY m.seq LIMIT 1),
                    (SELECT coalesce(max(seq), 0) + 1 FROM messages)) AS seq
    FROM stats s) AS next
WHERE stats.fresh_from <> next.seq;

-- name: payloads
SELECT seq, id, timestamp_ms, content_type, body FROM payloads
WHERE seq IN (SELECT value FROM json_each(:seqs));

-- name: leased_payloads
SELECT p.seq, p.id, p.timestamp_ms, p.content_type, p.body FROM messages m CROSS JOIN payloads p ON p.seq = m.seq
WHERE m.lease = :token AND m.seq IN (SELECT value FROM json_each(:seqs));

-- name: held
-- Which of these messages are still held under the lease (a retry found their deliveries used up).
SELECT seq FROM messages WHERE lease = :token AND seq IN (SELECT value FROM json_each(:seqs));

-- name: ack
DELETE FROM messages WHERE lease = :token AND seq IN (SELECT value FROM json_each(:seqs))
RETURNING seq, size;

-- name: retry
UPDATE messages SET visible_at_ms = :visible_at, lease = NULL
WHERE lease = :token AND attempts < :max_deliveries AND seq IN (SELECT value FROM json_each(:seqs))
RETURNING seq;

-- name: take_leased
DELETE FROM messages WHERE lease = :token AND seq IN (SELECT value FROM json_each(:seqs))
RETURNING seq, size;

-- name: release
UPDATE messages SET visible_at_ms = :now, attempts = max(attempts - 1, 0), lease = NULL
WHERE lease = :token AND seq IN (SELECT value FROM json_each(:seqs));

-- name: extend
UPDATE messages SET visible_at_ms = :until
WHERE lease = :token AND seq IN (SELECT value FROM json_each(:seqs));

-- name: lease_of
SELECT seq, lease FROM messages WHERE seq IN (SELECT value FROM json_each(:seqs));

-- name: purge_payloads
-- First, in one sweep (a table without triggers is emptied whole); `purge` then empties `messages`
-- with its delete trigger set aside.
DELETE FROM payloads;

-- name: delete_trigger
-- The trigger that deletes a message's payload with its state, as the schema made it: purge drops
-- it while it empties the table (a table with a delete trigger is emptied row by row) and remakes it.
SELECT sql FROM sqlite_schema WHERE type = 'trigger' AND name = 'messages_gone';

-- name: drop_delete_trigger
DROP TRIGGER messages_gone;

-- name: purge
DELETE FROM messages;

-- name: purge_counts
UPDATE stats SET backlog_count = 0, backlog_bytes = 0, counted_through = 0, fresh_from = 0;

-- name: peek
-- In the lease's order: the indexed messages by time and the fresh ones by seq, merged.
SELECT m.seq, p.id, p.timestamp_ms, p.content_type, p.body, m.attempts FROM (
    SELECT * FROM (SELECT seq, visible_at_ms FROM messages WHERE fresh = 0 ORDER BY visible_at_ms LIMIT :n)
    UNION ALL
    SELECT * FROM (SELECT seq, visible_at_ms FROM messages WHERE seq >= (SELECT fresh_from FROM stats) AND fresh = 1
                   ORDER BY seq LIMIT :n)
    ORDER BY visible_at_ms, seq LIMIT :n
) AS v CROSS JOIN messages m ON m.seq = v.seq CROSS JOIN payloads p ON p.seq = v.seq
ORDER BY v.visible_at_ms, v.seq;

-- name: oldest_rows
SELECT seq, id, timestamp_ms, content_type, body FROM payloads ORDER BY seq LIMIT :n;

-- name: remove
DELETE FROM messages WHERE seq IN (SELECT value FROM json_each(:seqs)) RETURNING size;

-- name: next_visible
-- The indexed messages' earliest time, or the first fresh one's (its send time: it is deliverable).
SELECT min(t) FROM (
    SELECT min(visible_at_ms) AS t FROM messages WHERE fresh = 0
    UNION ALL
    SELECT * FROM (SELECT visible_at_ms FROM messages WHERE seq >= (SELECT fresh_from FROM stats) AND fresh = 1
                   ORDER BY seq LIMIT 1)
);

-- name: in_flight
SELECT count(*) FROM messages WHERE fresh = 0 AND lease IS NOT NULL AND visible_at_ms > :now;

-- name: expire
-- Costs what expires, not what the shard holds, with no index of its own to pay on every send: sent
-- messages are stored in send-time order (a retry or a delay changes a state row, never the
-- payload's seq or timestamp), so those sent before the cutoff come first by seq. They are read in
-- seq order up to the first one still within retention; the moved ones, which keep older send
-- times, through their partial index. A message stamped out of order (processes sharing a shard
-- commit in another order than they read the clock, or the clock stepped back) waits for the ones
-- before it: it expires later by that difference, never early.
DELETE FROM messages WHERE seq IN (
    SELECT seq FROM payloads
    WHERE moved = 0 AND timestamp_ms < :cutoff
      -- the boundary: the first sent message still within retention (none: past every seq)
      AND seq < coalesce((SELECT seq FROM payloads WHERE moved = 0 AND timestamp_ms >= :cutoff ORDER BY seq LIMIT 1),
                         9223372036854775807)
    UNION ALL
    SELECT seq FROM payloads WHERE moved = 1 AND timestamp_ms < :cutoff
) RETURNING size;

-- name: backlog
-- With the sends not yet counted (schema version 3 on; `backlog_counted` reads older files).
SELECT backlog_count + (SELECT count(*) FROM messages WHERE seq > counted_through) FROM stats;

-- name: backlog_counted
-- Files of versions 1 and 2 count every message in `stats` (so `conveyor doctor` reads them too).
SELECT backlog_count FROM stats;

-- name: stats
SELECT s.backlog_count + count(m.seq), s.backlog_bytes + coalesce(sum(m.size), 0), s.sent + count(m.seq),
       s.acked, s.retried, s.dead_lettered, s.expired, s.dropped
FROM stats s LEFT JOIN messages m ON m.seq > s.counted_through;
