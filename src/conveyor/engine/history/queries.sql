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

-- name: newest_of_queue
-- One queue's newest :count points since a time, newest first (the overview's figures and rates: a
-- seek of the primary key per queue, however many points the window holds).
SELECT queue_id, queue_name, at_ms, backlog, backlog_bytes, oldest_ms, in_flight, sent, acked, retried,
       dead_lettered, concurrency
FROM queue_history WHERE queue_name = :name AND at_ms >= :since
ORDER BY at_ms DESC LIMIT :count;

-- name: backlog_by_bucket
-- One queue's backlog since a time, thinned to one point per :bucket_ms (the highest backlog in
-- each): a sparkline of 30 minutes is 30 points, whatever the recording interval.
SELECT at_ms / :bucket_ms AS bucket, MAX(backlog) AS backlog
FROM queue_history WHERE queue_name = :name AND at_ms >= :since
GROUP BY 1
ORDER BY 1;

-- name: newest_of_queues
-- PostgreSQL only: newest_of_queue for an array of queue names in one statement (a seek a name),
-- so 1,000 queues are one round trip, not 1,000.
SELECT h.queue_id, h.queue_name, h.at_ms, h.backlog, h.backlog_bytes, h.oldest_ms, h.in_flight, h.sent, h.acked,
       h.retried, h.dead_lettered, h.concurrency
FROM unnest(CAST(:names AS text[])) AS wanted(name)
CROSS JOIN LATERAL (
    SELECT queue_id, queue_name, at_ms, backlog, backlog_bytes, oldest_ms, in_flight, sent, acked, retried,
           dead_lettered, concurrency
    FROM queue_history WHERE queue_name = wanted.name AND at_ms >= :since
    ORDER BY at_ms DESC LIMIT :count
) AS h
ORDER BY h.queue_name, h.at_ms;

-- name: backlog_by_bucket_of_queues
-- PostgreSQL only: backlog_by_bucket for an array of queue names in one statement.
SELECT queue_name, at_ms / :bucket_ms AS bucket, MAX(backlog) AS backlog
FROM queue_history WHERE queue_name = ANY(CAST(:names AS text[])) AND at_ms >= :since
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: newest_of_queues_json
-- SQLite only: newest_of_queue for a JSON array of queue names in one statement (per name, a seek
-- of the primary key for the newest :count times, and one a point), so 1,000 queues are one read.
SELECT h.queue_id, h.queue_name, h.at_ms, h.backlog, h.backlog_bytes, h.oldest_ms, h.in_flight, h.sent, h.acked,
       h.retried, h.dead_lettered, h.concurrency
FROM json_each(:names) AS wanted
JOIN queue_history AS h ON h.queue_name = wanted.value
WHERE h.at_ms IN (
    SELECT at_ms FROM queue_history WHERE queue_name = wanted.value AND at_ms >= :since
    ORDER BY at_ms DESC LIMIT :count
)
ORDER BY h.queue_name, h.at_ms;

-- name: backlog_by_bucket_of_queues_json
-- SQLite only: backlog_by_bucket for a JSON array of queue names in one statement.
SELECT queue_name, at_ms / :bucket_ms AS bucket, MAX(backlog) AS backlog
FROM queue_history WHERE queue_name IN (SELECT value FROM json_each(:names)) AND at_ms >= :since
GROUP BY 1, 2
ORDER BY 1, 2;
