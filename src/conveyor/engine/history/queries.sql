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

-- name: newest_of_prefix
-- The newest :count points of every queue in [lo, hi) since a time (the overview's figures and
-- rates: two points a queue, however many the window holds).
SELECT queue_id, queue_name, at_ms, backlog, backlog_bytes, oldest_ms, in_flight, sent, acked, retried,
       dead_lettered, concurrency
FROM (
    SELECT queue_id, queue_name, at_ms, backlog, backlog_bytes, oldest_ms, in_flight, sent, acked, retried,
           dead_lettered, concurrency,
           ROW_NUMBER() OVER (PARTITION BY queue_name ORDER BY at_ms DESC) AS newest
    FROM queue_history WHERE queue_name >= :lo AND queue_name < :hi AND at_ms >= :since
) AS recent
WHERE newest <= :count
ORDER BY queue_name, at_ms;

-- name: backlog_by_bucket
-- One queue's backlog since a time, thinned to one point per :bucket_ms (the highest backlog in
-- each): a sparkline of 30 minutes is 30 points, whatever the recording interval.
SELECT at_ms / :bucket_ms AS bucket, MAX(backlog) AS backlog
FROM queue_history WHERE queue_name = :name AND at_ms >= :since
GROUP BY 1
ORDER BY 1;
