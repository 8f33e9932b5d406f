-- Super Slurper's named queries, run on SQLite (slurper.db) and PostgreSQL (migration 0012) alike.
-- Every state transition of a job or a key is one of these, inside JobStore's transactions.

-- name: insert_job
INSERT INTO slurper_jobs (id, account, created_ms, status, overwrite, source, target)
VALUES (:id, :account, :created_ms, 'running', :overwrite, :source, :target);

-- name: job
SELECT id, account, created_ms, finished_ms, status, overwrite, source, target, objects, transferred,
       skipped, failed, bytes_listed, bytes_transferred, next_listing, listing_after, listing_done,
       lifecycle_tick
FROM slurper_jobs WHERE id = :id;

-- name: jobs_of_account
SELECT id, account, created_ms, finished_ms, status, overwrite, source, target, objects, transferred,
       skipped, failed, bytes_listed, bytes_transferred, next_listing, listing_after, listing_done,
       lifecycle_tick
FROM slurper_jobs WHERE account = :account
ORDER BY created_ms DESC, id DESC LIMIT :limit OFFSET :offset;

-- name: active_jobs_of_account
SELECT id FROM slurper_jobs WHERE account = :account AND status IN ('running', 'paused') ORDER BY id;

-- name: set_status
UPDATE slurper_jobs SET status = :status, finished_ms = :finished_ms
WHERE id = :id AND status = :expected;

-- name: complete_job
UPDATE slurper_jobs SET status = 'completed', finished_ms = :now
WHERE id = :id AND status = 'running' AND listing_done = 1
  AND transferred + skipped + failed = objects;

-- name: job_done
SELECT id FROM slurper_jobs
WHERE id = :id AND listing_done = 1 AND transferred + skipped + failed = objects;

-- name: record_listing
UPDATE slurper_jobs
SET next_listing = next_listing + 1, listing_after = :after, listing_done = :done,
    objects = objects + :added, bytes_listed = bytes_listed + :bytes
WHERE id = :id AND next_listing = :seq;

-- name: insert_key
INSERT INTO slurper_keys (job_id, key, listing, size, etag, storage_class, state)
VALUES (:job_id, :key, :listing, :size, :etag, :storage_class, 'pending')
ON CONFLICT DO NOTHING;

-- name: pending_keys_of_listing
SELECT key FROM slurper_keys
WHERE job_id = :job_id AND listing = :listing AND state = 'pending' ORDER BY key;

-- name: pending_keys_after
SELECT key FROM slurper_keys
WHERE job_id = :job_id AND key > :after AND state = 'pending' ORDER BY key LIMIT :limit;

-- name: key
SELECT state, owner, size, etag, storage_class FROM slurper_keys WHERE job_id = :job_id AND key = :key;

-- name: key_states
SELECT state, COUNT(*) FROM slurper_keys WHERE job_id = :job_id GROUP BY state ORDER BY state;

-- name: lock_key
UPDATE slurper_keys SET state = 'locked', owner = :owner
WHERE job_id = :job_id AND key = :key AND (state = 'pending' OR (state = 'locked' AND owner = :owner));

-- name: release_key
UPDATE slurper_keys SET state = 'pending', owner = NULL
WHERE job_id = :job_id AND key = :key AND state = 'locked' AND owner = :owner;

-- name: finish_key
UPDATE slurper_keys SET state = :state, owner = NULL
WHERE job_id = :job_id AND key = :key AND state = 'locked' AND owner = :owner;

-- name: count_transferred
UPDATE slurper_jobs SET transferred = transferred + 1, bytes_transferred = bytes_transferred + :bytes
WHERE id = :id;

-- name: count_skipped
UPDATE slurper_jobs SET skipped = skipped + 1 WHERE id = :id;

-- name: count_failed
UPDATE slurper_jobs SET failed = failed + 1 WHERE id = :id;

-- name: advance_tick
UPDATE slurper_jobs SET lifecycle_tick = lifecycle_tick + 1 WHERE id = :id AND lifecycle_tick = :tick;

-- name: insert_log
INSERT INTO slurper_logs (job_id, created_ms, log_type, message, object_key)
VALUES (:job_id, :created_ms, :log_type, :message, :object_key);

-- name: logs_of_job
SELECT created_ms, log_type, message, object_key FROM slurper_logs
WHERE job_id = :job_id ORDER BY id LIMIT :limit OFFSET :offset;

-- name: logs_of_job_by_type
SELECT created_ms, log_type, message, object_key FROM slurper_logs
WHERE job_id = :job_id AND log_type = :log_type ORDER BY id LIMIT :limit OFFSET :offset;
