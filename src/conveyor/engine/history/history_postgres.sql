-- The queue history of a PostgreSQL deployment: the table of migration 0021_dashboard.sql.

-- name: insert
INSERT INTO queue_history
    (queue_id, queue_name, at_ms, backlog, backlog_bytes, oldest_ms, in_flight, sent, acked, retried,
     dead_lettered, concurrency)
VALUES (%(queue_id)s, %(queue_name)s, %(at_ms)s, %(backlog)s, %(backlog_bytes)s, %(oldest_ms)s, %(in_flight)s,
        %(sent)s, %(acked)s, %(retried)s, %(dead_lettered)s, %(concurrency)s)
ON CONFLICT (queue_name, at_ms) DO NOTHING;

-- name: prune
DELETE FROM queue_history WHERE at_ms < %(cutoff)s;

-- name: of_queue
SELECT queue_id, queue_name, at_ms, backlog, backlog_bytes, oldest_ms, in_flight, sent, acked, retried,
       dead_lettered, concurrency
FROM queue_history WHERE queue_name = %(name)s AND at_ms >= %(since)s ORDER BY at_ms;

-- name: of_prefix
SELECT queue_id, queue_name, at_ms, backlog, backlog_bytes, oldest_ms, in_flight, sent, acked, retried,
       dead_lettered, concurrency
FROM queue_history WHERE queue_name >= %(lo)s AND queue_name < %(hi)s AND at_ms >= %(since)s
ORDER BY queue_name, at_ms;
