-- The queue history's queries, for both engines (engine/tables.py runs them: ``:name`` parameters).
-- SQLite keeps the table in history.db (history_sqlite.sql), PostgreSQL in migration 0021_dashboard.sql.

-- name: insert
INSERT INTO queue_history
    (queue_id, queue_name, at_ms, backlog, backlog_bytes, oldest_ms, in_flight, sent, acked, retried,
     dead_lettered, concurrency)
VALUES (:queue_id, :queue_name, :at_ms, :backlog, :backlog_bytes, :oldest_ms, :in_flight, :sent, :acked,
        :retried, :dead_lettered, :concurrency)
ON CONFLICT (queue_name, at_ms) DO NOTHING;

-- name: prune
DELETE FROM queue_history WHERE at_ms < :cutoff;

-- name: of_queue
SELECT queue_id, queue_name, at_ms, backlog, backlog_bytes, oldest_ms, in_flight, sent, acked, retried,
       dead_lettered, concurrency
FROM queue_history WHERE queue_name = :name AND at_ms >= :since ORDER BY at_ms;

-- name: of_prefix
-- Every queue whose qualified name is in [lo, hi) (an account's queues), since a time.
SELECT queue_id, queue_name, at_ms, backlog, backlog_bytes, oldest_ms, in_flight, sent, acked, retried,
       dead_lettered, concurrency
FROM queue_history WHERE queue_name >= :lo AND queue_name < :hi AND at_ms >= :since
ORDER BY queue_name, at_ms;
