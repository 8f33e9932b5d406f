-- The worker registry, in catalog.db: one row per live worker process (`conveyor workers list`).
-- Created in place in directories made before it (CREATE ... IF NOT EXISTS on every open).
-- `registered_by` is the account whose token registered a remote worker ('' for the operator's own
-- processes); `runs` is JSON: [{queue_id, queue_name, script_name, max_concurrency, concurrency}].

-- name: create
CREATE TABLE IF NOT EXISTS workers (
    worker_id     TEXT PRIMARY KEY,
    registered_by TEXT NOT NULL,
    host          TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    started_ms    INTEGER NOT NULL,
    heartbeat_ms  INTEGER NOT NULL,
    runs          TEXT NOT NULL
);

-- name: prune
DELETE FROM workers WHERE heartbeat_ms < :cutoff;

-- name: record
-- A row of another registrant keeps its values: the caller sees no change and refuses.
INSERT INTO workers (worker_id, registered_by, host, pid, started_ms, heartbeat_ms, runs)
VALUES (:worker, :by, :host, :pid, :started, :now, :runs)
ON CONFLICT (worker_id) DO UPDATE SET heartbeat_ms = excluded.heartbeat_ms, runs = excluded.runs,
    host = excluded.host, pid = excluded.pid
WHERE workers.registered_by = excluded.registered_by;

-- name: remove
DELETE FROM workers WHERE worker_id = :worker AND registered_by = :by;

-- name: list
SELECT worker_id, host, pid, started_ms, heartbeat_ms, runs FROM workers
WHERE heartbeat_ms >= :cutoff ORDER BY started_ms, worker_id;
