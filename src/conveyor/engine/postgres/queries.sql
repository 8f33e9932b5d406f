-- Every state transition of the PostgreSQL engine, as named queries. Parameters are %(name)s;
-- lists travel as arrays and are joined with unnest, so one statement handles a whole batch.
-- Times come in as parameters (the engine's clock), never from now().

-- ============================================================================= catalog

-- name: queue_by_name
-- The queue, once per consumer (a queue has at most one; NULLs when it has none): one round trip.
SELECT q.queue_id, q.name, q.created_on, q.modified_on, q.delivery_delay, q.delivery_paused, q.retention,
       (SELECT count(*) FROM shards s WHERE s.queue_id = q.queue_id),
       c.consumer_id, c.queue_id, q.name, c.type, c.script_name, c.created_on, c.dead_letter_queue, c.settings
FROM queues q LEFT JOIN consumers c ON c.queue_id = q.queue_id WHERE q.name = %(key)s;

-- name: queue_by_id
SELECT q.queue_id, q.name, q.created_on, q.modified_on, q.delivery_delay, q.delivery_paused, q.retention,
       (SELECT count(*) FROM shards s WHERE s.queue_id = q.queue_id),
       c.consumer_id, c.queue_id, q.name, c.type, c.script_name, c.created_on, c.dead_letter_queue, c.settings
FROM queues q LEFT JOIN consumers c ON c.queue_id = q.queue_id WHERE q.queue_id = %(key)s;

-- name: queue_settings
SELECT delivery_delay, delivery_paused, retention FROM queues WHERE queue_id = %(queue)s;

-- name: queues_listed
-- Every queue with its consumer (as `queue_by_id`), by name: one statement however many queues.
SELECT q.queue_id, q.name, q.created_on, q.modified_on, q.delivery_delay, q.delivery_paused, q.retention,
       (SELECT count(*) FROM shards s WHERE s.queue_id = q.queue_id),
       c.consumer_id, c.queue_id, q.name, c.type, c.script_name, c.created_on, c.dead_letter_queue, c.settings
FROM queues q LEFT JOIN consumers c ON c.queue_id = q.queue_id
ORDER BY q.name;

-- name: queues_listed_in_range
-- The queues whose names start with a prefix (base.prefix_range). Compared byte-wise (COLLATE "C"):
-- under a database's linguistic collation 'acc1/q' sorts after 'acc10'. Migration 6's index on
-- names in that collation answers the range, so listing one account's queues reads only its own.
SELECT q.queue_id, q.name, q.created_on, q.modified_on, q.delivery_delay, q.delivery_paused, q.retention,
       (SELECT count(*) FROM shards s WHERE s.queue_id = q.queue_id),
       c.consumer_id, c.queue_id, q.name, c.type, c.script_name, c.created_on, c.dead_letter_queue, c.settings
FROM queues q LEFT JOIN consumers c ON c.queue_id = q.queue_id
WHERE q.name COLLATE "C" >= %(low)s AND q.name COLLATE "C" < %(high)s
ORDER BY q.name;

-- name: names
SELECT name FROM queues ORDER BY name;

-- name: names_in_range
SELECT name FROM queues
WHERE name COLLATE "C" >= %(low)s AND name COLLATE "C" < %(high)s
ORDER BY name;

-- name: queues_named
-- The queues of an array of names with their consumer (as `queue_by_id`), by name.
SELECT q.queue_id, q.name, q.created_on, q.modified_on, q.delivery_delay, q.delivery_paused, q.retention,
       (SELECT count(*) FROM shards s WHERE s.queue_id = q.queue_id),
       c.consumer_id, c.queue_id, q.name, c.type, c.script_name, c.created_on, c.dead_letter_queue, c.settings
FROM queues q LEFT JOIN consumers c ON c.queue_id = q.queue_id
WHERE q.name = ANY(%(names)s::text[])
ORDER BY q.name;

-- name: dead_letter_sources
-- The queues whose consumer dead-letters into a queue (a scan of the consumers: one a queue at most).
SELECT q.name FROM consumers c JOIN queues q USING (queue_id) WHERE c.dead_letter_queue = %(dlq)s
ORDER BY q.name;

-- name: consumer
SELECT c.consumer_id, c.queue_id, q.name, c.type, c.script_name, c.created_on, c.dead_letter_queue, c.settings
FROM consumers c JOIN queues q USING (queue_id) WHERE c.consumer_id = %(consumer)s;

-- name: insert_queue
INSERT INTO queues (queue_id, name, created_on, modified_on, delivery_delay, delivery_paused, retention)
VALUES (%(queue)s, %(name)s, %(now)s, %(now)s, %(delay)s, %(paused)s, %(retention)s)
ON CONFLICT (name) DO NOTHING
RETURNING queue_id;

-- name: update_queue
UPDATE queues SET delivery_delay = %(delay)s, delivery_paused = %(paused)s, retention = %(retention)s,
                  modified_on = %(now)s
WHERE queue_id = %(queue)s;

-- name: delete_queue
DELETE FROM queues WHERE queue_id = %(queue)s RETURNING queue_id;

-- name: insert_shard
INSERT INTO shards (queue_id, shard_no, created_ms)
SELECT %(queue)s, coalesce(max(shard_no) + 1, 0), %(now)s FROM shards WHERE queue_id = %(queue)s
RETURNING shard_key, shard_no;

-- name: insert_shard_stats
INSERT INTO shard_stats (shard_key, slot) SELECT %(shard)s, generate_series(0, %(slots)s - 1);

-- name: create_partition
-- A template: {partition} and {key} are filled in (as an identifier and a literal) by the engine.
-- Queue tables churn: every message is inserted, updated and deleted. Vacuum them after a fixed
-- number of dead rows, not a fraction of the table, and without cost-based sleeping.
CREATE TABLE {partition} PARTITION OF messages FOR VALUES IN ({key})
WITH (fillfactor = 90, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
      autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 50000,
      autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 5000,
      autovacuum_vacuum_cost_delay = 0);

-- name: drop_partition
DROP TABLE IF EXISTS {partition};

-- name: shards_of
SELECT shard_key, shard_no, state FROM shards WHERE queue_id = %(queue)s ORDER BY shard_no;

-- name: shard_keys
SELECT shard_key FROM shards WHERE queue_id = %(queue)s;

-- name: producer_slot
SELECT nextval('producer_slot');

-- name: insert_consumer
INSERT INTO consumers (consumer_id, queue_id, type, script_name, created_on, dead_letter_queue, settings)
VALUES (%(consumer)s, %(queue)s, %(type)s, %(script)s, %(now)s, %(dlq)s, %(settings)s)
ON CONFLICT (queue_id) DO NOTHING
RETURNING consumer_id;

-- name: update_consumer
UPDATE consumers SET settings = %(settings)s, dead_letter_queue = %(dlq)s WHERE consumer_id = %(consumer)s;

-- name: delete_consumer
DELETE FROM consumers WHERE consumer_id = %(consumer)s;

-- ============================================================================= messages

-- name: enqueue
-- Counting first: a queue deleted meanwhile has no counter row left, so nothing is inserted and the
-- statement returns no row. Otherwise it returns the queue's metrics after this send: the other
-- counter rows as of the statement's snapshot plus this one as updated, and the oldest message
-- (this send's, if the queue held none before; see migrations/0002_moved_messages.sql).
WITH counted AS (
    UPDATE shard_stats
    SET backlog_count = backlog_count + cardinality(%(ids)b::text[]),
        backlog_bytes = backlog_bytes + %(bytes)s, sent = sent + %(sent)s
    WHERE shard_key = %(shard)s AND slot = %(slot)s
    RETURNING backlog_count, backlog_bytes
), stored AS (
    INSERT INTO messages (shard_key, id, timestamp_ms, visible_at_ms, attempts, content_type, body)
    SELECT %(shard)s, m.id, m.ts,
           coalesce(m.visible, m.ts + (SELECT delivery_delay::bigint * 1000 FROM queues WHERE queue_id = %(queue)s)),
           0, m.ctype, m.body
    FROM unnest(%(ids)b::text[], %(ts)b::bigint[], %(visible)b::bigint[], %(ctypes)b::text[], %(bodies)b::bytea[])
         AS m (id, ts, visible, ctype, body)
    WHERE EXISTS (SELECT 1 FROM counted)
    RETURNING 1
)
SELECT c.backlog_count + coalesce(o.backlog_count, 0), c.backlog_bytes + coalesce(o.backlog_bytes, 0),
       coalesce(conveyor_oldest_ms(%(shards)s::bigint[]), %(now)s)
FROM counted c,
     LATERAL (SELECT sum(st.backlog_count) AS backlog_count, sum(st.backlog_bytes) AS backlog_bytes
              FROM shard_stats st
              WHERE st.shard_key = ANY (%(shards)s::bigint[]) AND NOT (st.shard_key = %(shard)s AND st.slot = %(slot)s)) AS o;

-- name: lease
-- Each row also carries the queue's settings as of this statement, so that a consumer leasing in a
-- loop knows whether the queue was paused meanwhile without reading the catalog again.
WITH picked AS (
    SELECT seq FROM messages
    WHERE shard_key = %(shard)s AND visible_at_ms <= %(now)s
    ORDER BY visible_at_ms
    LIMIT %(n)s
    FOR UPDATE SKIP LOCKED
)
UPDATE messages m SET visible_at_ms = %(until)s, attempts = m.attempts + 1, lease = %(token)s
FROM picked, queues q
WHERE m.shard_key = %(shard)s AND m.seq = picked.seq AND q.queue_id = %(queue)s
RETURNING m.seq, m.id, m.timestamp_ms, m.content_type, m.body, m.attempts,
          q.delivery_delay, q.delivery_paused, q.retention;

-- name: settle
-- Acks delete, retries with deliveries left become visible at their time; retries whose deliveries
-- are used up are only reported ('exhausted'), still leased, for the engine to dead-letter. Lease ids
-- that matched nothing are reported as 'superseded' (the message is there under a newer lease) or
-- 'missing'. One row of counts comes first.
WITH acks AS (
    SELECT * FROM unnest(%(ack_tokens)s::bigint[], %(ack_seqs)s::bigint[]) AS a (token, seq)
), retries AS (
    SELECT * FROM unnest(%(retry_tokens)s::bigint[], %(retry_seqs)s::bigint[], %(retry_at)s::bigint[])
             AS r (token, seq, visible_at)
    WHERE (r.token, r.seq) NOT IN (SELECT token, seq FROM acks)
), acked AS (
    DELETE FROM messages m USING acks a
    WHERE m.shard_key = %(shard)s AND m.seq = a.seq AND m.lease = a.token
    RETURNING m.lease AS token, m.seq, length(m.body) AS size
), retried AS (
    UPDATE messages m SET visible_at_ms = r.visible_at, lease = NULL
    FROM retries r
    WHERE m.shard_key = %(shard)s AND m.seq = r.seq AND m.lease = r.token AND m.attempts < %(max_deliveries)s
    RETURNING r.token, m.seq
), exhausted AS (
    SELECT r.token, m.seq FROM messages m JOIN retries r ON m.seq = r.seq AND m.lease = r.token
    WHERE m.shard_key = %(shard)s AND m.attempts >= %(max_deliveries)s
), done AS (
    SELECT token, seq FROM acked UNION ALL SELECT token, seq FROM retried UNION ALL SELECT token, seq FROM exhausted
), counted AS (
    UPDATE shard_stats
    SET backlog_count = backlog_count - (SELECT count(*) FROM acked),
        backlog_bytes = backlog_bytes - (SELECT coalesce(sum(size), 0) FROM acked),
        acked = acked + (SELECT count(*) FROM acked),
        retried = retried + (SELECT count(*) FROM retried)
    WHERE shard_key = %(shard)s AND slot = %(slot)s AND EXISTS (SELECT 1 FROM acked UNION ALL SELECT 1 FROM retried)
    RETURNING 1
)
SELECT 'counts', (SELECT count(*) FROM acked), (SELECT count(*) FROM retried)
UNION ALL
SELECT 'exhausted', token, seq FROM exhausted
UNION ALL
SELECT CASE WHEN EXISTS (SELECT 1 FROM messages x WHERE x.shard_key = %(shard)s AND x.seq = t.seq)
            THEN 'superseded' ELSE 'missing' END,
       t.token, t.seq
FROM (SELECT token, seq FROM acks UNION ALL SELECT token, seq FROM retries) t
WHERE (t.token, t.seq) NOT IN (SELECT token, seq FROM done);

-- name: dead_letter
-- Move messages still held under their lease to the dead letter queue's shard (or drop them when
-- the dead letter shard is NULL), in one transaction: never in both queues, never in neither.
WITH moved AS (
    DELETE FROM messages m USING unnest(%(tokens)s::bigint[], %(seqs)s::bigint[]) AS d (token, seq)
    WHERE m.shard_key = %(shard)s AND m.seq = d.seq AND m.lease = d.token
    RETURNING m.id, m.timestamp_ms, m.content_type, m.body
), copied AS (
    INSERT INTO messages (shard_key, id, timestamp_ms, visible_at_ms, attempts, content_type, body, moved)
    SELECT %(dlq_shard)s, id, timestamp_ms, %(now)s, 0, content_type, body, true
    FROM moved WHERE %(dlq_shard)s::bigint IS NOT NULL
    RETURNING length(body) AS size
), source AS (
    UPDATE shard_stats
    SET backlog_count = backlog_count - (SELECT count(*) FROM moved),
        backlog_bytes = backlog_bytes - (SELECT coalesce(sum(length(body)), 0) FROM moved),
        dead_lettered = dead_lettered + (SELECT count(*) FROM copied),
        dropped = dropped + (SELECT count(*) FROM moved) - (SELECT count(*) FROM copied)
    WHERE shard_key = %(shard)s AND slot = %(slot)s
), target AS (
    UPDATE shard_stats
    SET backlog_count = backlog_count + (SELECT count(*) FROM copied),
        backlog_bytes = backlog_bytes + (SELECT coalesce(sum(size), 0) FROM copied)
    WHERE shard_key = %(dlq_shard)s AND slot = %(slot)s
)
SELECT count(*) FROM moved;

-- name: move_oldest
-- Redrive: move a shard's oldest messages, whatever their state, to another shard as new deliveries.
WITH moved AS (
    DELETE FROM messages
    WHERE shard_key = %(shard)s
      AND seq IN (SELECT seq FROM messages WHERE shard_key = %(shard)s ORDER BY seq LIMIT %(n)s)
    RETURNING id, timestamp_ms, content_type, body
), copied AS (
    INSERT INTO messages (shard_key, id, timestamp_ms, visible_at_ms, attempts, content_type, body, moved)
    SELECT %(target)s, id, timestamp_ms, %(now)s, 0, content_type, body, true FROM moved
    RETURNING length(body) AS size
), source AS (
    UPDATE shard_stats
    SET backlog_count = backlog_count - (SELECT count(*) FROM copied),
        backlog_bytes = backlog_bytes - (SELECT coalesce(sum(size), 0) FROM copied)
    WHERE shard_key = %(shard)s AND slot = %(slot)s
), target AS (
    UPDATE shard_stats
    SET backlog_count = backlog_count + (SELECT count(*) FROM copied),
        backlog_bytes = backlog_bytes + (SELECT coalesce(sum(size), 0) FROM copied)
    WHERE shard_key = %(target)s AND slot = %(slot)s
)
SELECT count(*) FROM copied;

-- name: extend
UPDATE messages m SET visible_at_ms = %(until)s
FROM unnest(%(tokens)s::bigint[], %(seqs)s::bigint[]) AS l (token, seq)
WHERE m.shard_key = %(shard)s AND m.seq = l.seq AND m.lease = l.token;

-- name: release
UPDATE messages m SET visible_at_ms = %(now)s, attempts = greatest(m.attempts - 1, 0), lease = NULL
FROM unnest(%(tokens)s::bigint[], %(seqs)s::bigint[]) AS l (token, seq)
WHERE m.shard_key = %(shard)s AND m.seq = l.seq AND m.lease = l.token;

-- name: purge
WITH gone AS (
    DELETE FROM messages WHERE shard_key = %(shard)s RETURNING length(body) AS size
), counted AS (
    UPDATE shard_stats
    SET backlog_count = backlog_count - (SELECT count(*) FROM gone),
        backlog_bytes = backlog_bytes - (SELECT coalesce(sum(size), 0) FROM gone)
    WHERE shard_key = %(shard)s AND slot = %(slot)s
)
SELECT count(*) FROM gone;

-- name: expiry_boundary
-- The first sent message of a shard, by seq, still within retention (none: all are older). Sent
-- messages are stored in send-time order (a retry or a delay updates the row, never its seq or
-- timestamp), so the primary key walks the expiring ones and stops at it.
SELECT seq FROM messages
WHERE shard_key = %(shard)s AND NOT moved AND timestamp_ms >= %(cutoff)s
ORDER BY seq LIMIT 1;

-- name: expire
-- Costs what expires, not what the partition holds, with no index of its own to pay on every
-- write: the sent messages before the boundary (by the primary key), and the moved ones, which keep
-- older send times (by their partial index). The boundary comes in as a value, not a subquery, so
-- the plan is made knowing how few rows lie below it. A message stamped out of order (engines on
-- hosts whose clocks differ) waits for the ones stored before it: it expires later by that
-- difference, never early.
WITH sent AS (
    DELETE FROM messages
    WHERE shard_key = %(shard)s AND seq < %(boundary)s AND NOT moved AND timestamp_ms < %(cutoff)s
    RETURNING length(body) AS size
), moved AS (
    DELETE FROM messages WHERE shard_key = %(shard)s AND moved AND timestamp_ms < %(cutoff)s
    RETURNING length(body) AS size
), gone AS (
    SELECT size FROM sent UNION ALL SELECT size FROM moved
), counted AS (
    UPDATE shard_stats
    SET backlog_count = backlog_count - (SELECT count(*) FROM gone),
        backlog_bytes = backlog_bytes - (SELECT coalesce(sum(size), 0) FROM gone),
        expired = expired + (SELECT count(*) FROM gone)
    WHERE shard_key = %(shard)s AND slot = %(slot)s AND EXISTS (SELECT 1 FROM gone)
)
SELECT count(*) FROM gone;

-- ============================================================================= reads

-- name: metrics
SELECT coalesce(sum(st.backlog_count), 0), coalesce(sum(st.backlog_bytes), 0),
       coalesce(conveyor_oldest_ms(%(shards)s::bigint[]), 0)
FROM shard_stats st WHERE st.shard_key = ANY (%(shards)s::bigint[]);

-- name: counters
SELECT coalesce(sum(sent), 0), coalesce(sum(acked), 0), coalesce(sum(retried), 0),
       coalesce(sum(dead_lettered), 0), coalesce(sum(expired), 0), coalesce(sum(dropped), 0),
       (SELECT count(*) FROM messages m
        WHERE m.shard_key = ANY (%(shards)s::bigint[]) AND m.lease IS NOT NULL AND m.visible_at_ms > %(now)s)
FROM shard_stats WHERE shard_key = ANY (%(shards)s::bigint[]);

-- name: sent
-- The counters alone, without the in-flight count of `counters` (the shard splitter's sample).
SELECT coalesce(sum(sent), 0) FROM shard_stats WHERE shard_key = ANY (%(shards)s::bigint[]);

-- name: peek
SELECT seq, id, timestamp_ms, content_type, body, attempts FROM messages
WHERE shard_key = ANY (%(shards)s::bigint[])
ORDER BY visible_at_ms LIMIT %(n)s;

-- name: next_visible
SELECT min(visible_at_ms) FROM messages WHERE shard_key = ANY (%(shards)s::bigint[]);
