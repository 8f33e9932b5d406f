-- The worker registry's statements (the table: migrations/0003_workers.sql).

-- name: prune
DELETE FROM workers WHERE heartbeat_ms < %(cutoff)s;

-- name: record
-- A row of another registrant keeps its values: the caller sees no change and refuses.
INSERT INTO workers (worker_id, registered_by, host, pid, started_ms, heartbeat_ms, runs)
VALUES (%(worker)s, %(by)s, %(host)s, %(pid)s, %(started)s, %(now)s, %(runs)s)
ON CONFLICT (worker_id) DO UPDATE SET heartbeat_ms = excluded.heartbeat_ms, runs = excluded.runs,
    host = excluded.host, pid = excluded.pid
WHERE workers.registered_by = excluded.registered_by;

-- name: remove
DELETE FROM workers WHERE worker_id = %(worker)s AND registered_by = %(by)s;

-- name: list
SELECT worker_id, host, pid, started_ms, heartbeat_ms, runs FROM workers
WHERE heartbeat_ms >= %(cutoff)s ORDER BY started_ms, worker_id;
