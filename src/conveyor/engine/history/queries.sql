-- The queue history's queries, for both engines (engine/tables.py runs them: ``:name`` parameters).
-- SQLite keeps the tables in history.db (history_sqlite.sql), PostgreSQL in migrations 0021_dashboard.sql
-- (queue_history) and 0024_queue_latest.sql (queue_latest: each queue's newest point and the one before).

-- name: insert
INSERT INTO queue_history
    (queue_id, queue_name, at_ms, backlog, backlog_bytes, oldest_ms, in_flight, sent, acked, retried,
     dead_lettered, concurrency)
VALUES (:queue_id, :queue_name, :at_ms, :backlog, :backlog_bytes, :oldest_ms, :in_flight, :sent, :acked,
        :retried, :dead_lettered, :concurrency)
ON CONFLICT (queue_name, at_ms) DO NOTHING;

-- name: record_latest
-- The point as its queue's newest (the newest before it becomes the p_ columns), unless the table
-- holds a point as new or newer: run with insert, in its transaction.
INSERT INTO queue_latest
    (queue_id, queue_name, at_ms, backlog, backlog_bytes, oldest_ms, in_flight, sent, acked, retried, dead_lettered, concurrency)
VALUES (:queue_id, :queue_name, :at_ms, :backlog, :backlog_bytes, :oldest_ms, :in_flight, :sent, :acked,
        :retried, :dead_lettered, :concurrency)
ON CONFLICT (queue_name) DO UPDATE SET
    queue_id = excluded.queue_id,
    at_ms = excluded.at_ms,
    backlog = excluded.backlog,
    backlog_bytes = excluded.backlog_bytes,
    oldest_ms = excluded.oldest_ms,
    in_flight = excluded.in_flight,
    sent = excluded.sent,
    acked = excluded.acked,
    retried = excluded.retried,
    dead_lettered = excluded.dead_lettered,
    concurrency = excluded.concurrency,
    p_queue_id = queue_latest.queue_id,
    p_at_ms = queue_latest.at_ms,
    p_backlog = queue_latest.backlog,
    p_backlog_bytes = queue_latest.backlog_bytes,
    p_oldest_ms = queue_latest.oldest_ms,
    p_in_flight = queue_latest.in_flight,
    p_sent = queue_latest.sent,
    p_acked = queue_latest.acked,
    p_retried = queue_latest.retried,
    p_dead_lettered = queue_latest.dead_lettered,
    p_concurrency = queue_latest.concurrency
WHERE excluded.at_ms > queue_latest.at_ms;

-- name: record_latest_previous
-- A point older than its queue's newest in queue_latest but newer than the one before it (recorded
-- out of order) becomes the one before it.
UPDATE queue_latest
SET p_queue_id = :queue_id, p_at_ms = :at_ms, p_backlog = :backlog, p_backlog_bytes = :backlog_bytes,
    p_oldest_ms = :oldest_ms, p_in_flight = :in_flight, p_sent = :sent, p_acked = :acked, p_retried = :retried,
    p_dead_lettered = :dead_lettered, p_concurrency = :concurrency
WHERE queue_name = :queue_name AND at_ms > :at_ms AND (p_at_ms IS NULL OR p_at_ms < :at_ms);

-- name: prune
DELETE FROM queue_history WHERE at_ms < :cutoff;

-- name: prune_latest
DELETE FROM queue_latest WHERE at_ms < :cutoff;

-- name: prune_latest_previous
UPDATE queue_latest
SET p_queue_id = NULL, p_at_ms = NULL, p_backlog = NULL, p_backlog_bytes = NULL, p_oldest_ms = NULL,
    p_in_flight = NULL, p_sent = NULL, p_acked = NULL, p_retried = NULL, p_dead_lettered = NULL,
    p_concurrency = NULL
WHERE p_at_ms < :cutoff;

-- name: of_queue
SELECT queue_id, queue_name, at_ms, backlog, backlog_bytes, oldest_ms, in_flight, sent, acked, retried,
       dead_lettered, concurrency
FROM queue_history WHERE queue_name = :name AND at_ms >= :since ORDER BY at_ms;

-- name: newest_of_queues
-- PostgreSQL only: each of an array of queues' newest :count points since a time, by queue and
-- time, in one statement (a seek of the primary key a name), so 1,000 queues are one round trip.
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
-- PostgreSQL only: each of an array of queues' backlog since a time, thinned to one point per
-- :bucket_ms (the highest in each: a 30-minute sparkline is 30 points whatever the interval), in
-- one statement.
SELECT queue_name, at_ms / :bucket_ms AS bucket, MAX(backlog) AS backlog
FROM queue_history WHERE queue_name = ANY(CAST(:names AS text[])) AND at_ms >= :since
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: newest_of_queues_json
-- SQLite only: newest_of_queues for a JSON array of queue names in one statement (per name, a seek
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
-- SQLite only: backlog_by_bucket_of_queues for a JSON array of queue names in one statement.
SELECT queue_name, at_ms / :bucket_ms AS bucket, MAX(backlog) AS backlog
FROM queue_history WHERE queue_name IN (SELECT value FROM json_each(:names)) AND at_ms >= :since
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: latest_figures_of_prefix
-- The figures the overview sorts by, of every queue whose qualified name is in [lo, hi) and whose
-- newest point is since a time: backlog, oldest message's age (ms), in flight, concurrency, and
-- messages sent a second between the newest point and the one before (0 without one since then).
-- One range read of queue_latest, whatever the number of queues.
SELECT queue_name, backlog,
       CASE WHEN oldest_ms <= 0 OR oldest_ms >= at_ms THEN 0 ELSE at_ms - oldest_ms END AS oldest_age_ms,
       in_flight, concurrency,
       CASE WHEN p_at_ms IS NULL OR p_at_ms < :since OR sent <= p_sent THEN 0.0
            ELSE CAST(sent - p_sent AS DOUBLE PRECISION) * 1000.0
                 / (CASE WHEN at_ms - p_at_ms > 1 THEN at_ms - p_at_ms ELSE 1 END)
       END AS sent_per_second
FROM queue_latest WHERE queue_name >= :lo AND queue_name < :hi AND at_ms >= :since;

-- name: latest_of_queues
-- PostgreSQL only: the newest point and the one before it of an array of queue names.
SELECT queue_id, queue_name, at_ms, backlog, backlog_bytes, oldest_ms, in_flight, sent, acked, retried,
       dead_lettered, concurrency, p_queue_id, p_at_ms, p_backlog, p_backlog_bytes, p_oldest_ms, p_in_flight,
       p_sent, p_acked, p_retried, p_dead_lettered, p_concurrency
FROM queue_latest WHERE queue_name = ANY(CAST(:names AS text[])) AND at_ms >= :since;

-- name: latest_of_queues_json
-- SQLite only: latest_of_queues for a JSON array of queue names.
SELECT queue_id, queue_name, at_ms, backlog, backlog_bytes, oldest_ms, in_flight, sent, acked, retried,
       dead_lettered, concurrency, p_queue_id, p_at_ms, p_backlog, p_backlog_bytes, p_oldest_ms, p_in_flight,
       p_sent, p_acked, p_retried, p_dead_lettered, p_concurrency
FROM queue_latest WHERE queue_name IN (SELECT value FROM json_each(:names)) AND at_ms >= :since;
