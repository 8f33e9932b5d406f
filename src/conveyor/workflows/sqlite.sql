-- The workflow store's queries on SQLite (workflows.db); sql_store.py runs them.

-- name: upsert_workflow_code
INSERT INTO workflows (account, name, settings, version_id, success_retention_ms, error_retention_ms, created_ms,
    modified_ms, code_settings, code_version, overrides)
VALUES (:account, :name, :code_settings, '', 0, 0, :now, :now, :code_settings, :code_version, '{}')
ON CONFLICT (account, name) DO UPDATE SET
    code_settings = excluded.code_settings, code_version = excluded.code_version, modified_ms = excluded.modified_ms;

-- name: upsert_workflow_overrides
INSERT INTO workflows (account, name, settings, version_id, success_retention_ms, error_retention_ms, created_ms,
    modified_ms, code_settings, code_version, overrides)
VALUES (:account, :name, :settings, '', 0, 0, :now, :now, NULL, '', :overrides)
ON CONFLICT (account, name) DO UPDATE SET overrides = excluded.overrides, modified_ms = excluded.modified_ms;

-- name: set_workflow_in_force
UPDATE workflows SET settings = :settings, version_id = :version_id,
    success_retention_ms = :success_retention_ms, error_retention_ms = :error_retention_ms
WHERE account = :account AND name = :name;

-- name: get_workflow
SELECT account, name, settings, version_id, created_ms, modified_ms, code_settings, overrides, code_version
FROM workflows WHERE account = :account AND name = :name;

-- name: lock_workflow
SELECT account, name, settings, version_id, created_ms, modified_ms, code_settings, overrides, code_version
FROM workflows WHERE account = :account AND name = :name;

-- name: list_workflows
SELECT account, name, settings, version_id, created_ms, modified_ms, code_settings, overrides, code_version
FROM workflows WHERE account = :account ORDER BY name;

-- name: put_version
INSERT INTO workflow_versions (account, workflow, id, settings, class_name, script_name, has_code, created_ms, modified_ms)
VALUES (:account, :workflow, :id, :settings, :class_name, :script_name, :has_code, :now, :now)
ON CONFLICT (account, workflow, id) DO UPDATE SET modified_ms = excluded.modified_ms;

-- name: list_versions
SELECT id, workflow, settings, class_name, script_name, has_code, created_ms, modified_ms FROM workflow_versions
WHERE account = :account AND workflow = :workflow
-- The version in force first (two puts in one millisecond tie on modified_ms), then the latest.
ORDER BY id = (SELECT version_id FROM workflows WHERE account = :account AND name = :workflow) DESC,
         modified_ms DESC, id DESC;

-- name: get_version
SELECT id, workflow, settings, class_name, script_name, has_code, created_ms, modified_ms FROM workflow_versions
WHERE account = :account AND workflow = :workflow AND id = :id;

-- name: instance_counts
SELECT status, count(*) FROM workflow_instances
WHERE account = :account AND workflow = :workflow
    AND (:start_ms IS NULL OR created_ms >= :start_ms) AND (:end_ms IS NULL OR created_ms <= :end_ms)
GROUP BY status;

-- name: delete_workflow_steps
DELETE FROM workflow_steps WHERE account = :account AND workflow = :workflow;

-- name: delete_workflow_events
DELETE FROM workflow_events WHERE account = :account AND workflow = :workflow;

-- name: delete_workflow_instances
DELETE FROM workflow_instances WHERE account = :account AND workflow = :workflow;

-- name: delete_workflow_versions
DELETE FROM workflow_versions WHERE account = :account AND workflow = :workflow;

-- name: delete_workflow
DELETE FROM workflows WHERE account = :account AND name = :name;

-- name: instance_id_taken
SELECT 1 FROM workflow_instance_ids WHERE account = :account AND workflow = :workflow AND id = :id;

-- name: take_instance_id
INSERT INTO workflow_instance_ids (account, workflow, id) VALUES (:account, :workflow, :id);

-- name: insert_instance
INSERT INTO workflow_instances (account, workflow, id, status, params, output, error, trace_id, version_id, epoch,
    run_message, wake_at_ms, waiting_for, paused_at_ms, resume_status, created_ms, modified_ms, started_ms, ended_ms,
    scheduled_ms, traceparent, origin, run_token)
VALUES (:account, :workflow, :id, :status, :params, :output, :error, :trace_id, :version_id, :epoch,
    :run_message, :wake_at_ms, :waiting_for, :paused_at_ms, :resume_status, :created_ms, :modified_ms, :started_ms, :ended_ms, :scheduled_ms,
    :traceparent, :origin, :run_token);

-- name: get_instance
SELECT account, workflow, id, status, params, output, error, trace_id, version_id, epoch, run_message, wake_at_ms,
    waiting_for, paused_at_ms, resume_status, created_ms, modified_ms, started_ms, ended_ms, scheduled_ms, traceparent, origin,
    run_token
FROM workflow_instances WHERE account = :account AND workflow = :workflow AND id = :id;

-- name: lock_instance
SELECT account, workflow, id, status, params, output, error, trace_id, version_id, epoch, run_message, wake_at_ms,
    waiting_for, paused_at_ms, resume_status, created_ms, modified_ms, started_ms, ended_ms, scheduled_ms, traceparent, origin,
    run_token
FROM workflow_instances WHERE account = :account AND workflow = :workflow AND id = :id;

-- name: fence_instance
-- What a run's step write needs of its instance (not its params, up to a mebibyte): who owns it.
SELECT status, epoch, run_token FROM workflow_instances WHERE account = :account AND workflow = :workflow AND id = :id;

-- name: finish_instance
-- A run's end, complete or errored, if the run that claimed the instance at its epoch (with its
-- token) still owns it: one statement, which reads nothing of the row (its params can be a mebibyte).
UPDATE workflow_instances SET status = :status, output = :output, error = :error, run_message = NULL,
    wake_at_ms = NULL, waiting_for = NULL, ended_ms = :now, modified_ms = :now
WHERE account = :account AND workflow = :workflow AND id = :id AND epoch = :epoch
    AND run_token IS :run_token AND status IN ('running', 'waitingForPause');

-- name: update_instance
-- What a run, a pause or a restart changes; params, trace_id and version_id are set when the
-- instance is made and never change (params can be a mebibyte, and the trace index is left alone).
UPDATE workflow_instances SET status = :status, output = :output, error = :error, epoch = :epoch,
    run_message = :run_message, wake_at_ms = :wake_at_ms, waiting_for = :waiting_for, paused_at_ms = :paused_at_ms,
    resume_status = :resume_status, modified_ms = :modified_ms, started_ms = :started_ms, ended_ms = :ended_ms,
    run_token = :run_token
WHERE account = :account AND workflow = :workflow AND id = :id;

-- name: list_instances_asc
SELECT account, workflow, id, status, params, output, error, trace_id, version_id, epoch, run_message, wake_at_ms,
    waiting_for, paused_at_ms, resume_status, created_ms, modified_ms, started_ms, ended_ms, scheduled_ms, traceparent, origin,
    run_token
FROM workflow_instances
WHERE account = :account AND workflow = :workflow
    AND (:status IS NULL OR status = :status)
    AND (:start_ms IS NULL OR created_ms >= :start_ms)
    AND (:end_ms IS NULL OR created_ms <= :end_ms)
    AND (:after_ms IS NULL OR created_ms > :after_ms OR (created_ms = :after_ms AND id > :after_id))
ORDER BY created_ms, id LIMIT :limit;

-- name: list_instances_of_status_asc
-- The same, of one status (a query of its own, so the planner takes the status index).
SELECT account, workflow, id, status, params, output, error, trace_id, version_id, epoch, run_message, wake_at_ms,
    waiting_for, paused_at_ms, resume_status, created_ms, modified_ms, started_ms, ended_ms, scheduled_ms, traceparent, origin,
    run_token
FROM workflow_instances
WHERE account = :account AND workflow = :workflow
    AND status = :status
    AND (:start_ms IS NULL OR created_ms >= :start_ms)
    AND (:end_ms IS NULL OR created_ms <= :end_ms)
    AND (:after_ms IS NULL OR created_ms > :after_ms OR (created_ms = :after_ms AND id > :after_id))
ORDER BY created_ms, id LIMIT :limit;

-- name: list_instances_desc
SELECT account, workflow, id, status, params, output, error, trace_id, version_id, epoch, run_message, wake_at_ms,
    waiting_for, paused_at_ms, resume_status, created_ms, modified_ms, started_ms, ended_ms, scheduled_ms, traceparent, origin,
    run_token
FROM workflow_instances
WHERE account = :account AND workflow = :workflow
    AND (:status IS NULL OR status = :status)
    AND (:start_ms IS NULL OR created_ms >= :start_ms)
    AND (:end_ms IS NULL OR created_ms <= :end_ms)
    AND (:after_ms IS NULL OR created_ms < :after_ms OR (created_ms = :after_ms AND id < :after_id))
ORDER BY created_ms DESC, id DESC LIMIT :limit;

-- name: list_instances_of_status_desc
-- The same, of one status (a query of its own, so the planner takes the status index).
SELECT account, workflow, id, status, params, output, error, trace_id, version_id, epoch, run_message, wake_at_ms,
    waiting_for, paused_at_ms, resume_status, created_ms, modified_ms, started_ms, ended_ms, scheduled_ms, traceparent, origin,
    run_token
FROM workflow_instances
WHERE account = :account AND workflow = :workflow
    AND status = :status
    AND (:start_ms IS NULL OR created_ms >= :start_ms)
    AND (:end_ms IS NULL OR created_ms <= :end_ms)
    AND (:after_ms IS NULL OR created_ms < :after_ms OR (created_ms = :after_ms AND id < :after_id))
ORDER BY created_ms DESC, id DESC LIMIT :limit;

-- name: delete_instance
DELETE FROM workflow_instances WHERE account = :account AND workflow = :workflow AND id = :id;

-- name: steps
SELECT key, seq, type, name, status, output, attempts, config, start_ms, end_ms FROM workflow_steps
WHERE account = :account AND workflow = :workflow AND instance = :id ORDER BY seq;

-- name: put_step
INSERT INTO workflow_steps (account, workflow, instance, key, seq, type, name, status, output, attempts, config, start_ms, end_ms)
VALUES (:account, :workflow, :instance, :key, :seq, :type, :name, :status, :output, :attempts, :config, :start_ms, :end_ms)
ON CONFLICT (account, workflow, instance, key) DO UPDATE SET
    seq = excluded.seq, status = excluded.status, output = excluded.output, attempts = excluded.attempts,
    config = excluded.config, start_ms = excluded.start_ms, end_ms = excluded.end_ms;

-- name: step_seq
SELECT seq FROM workflow_steps WHERE account = :account AND workflow = :workflow AND instance = :id AND key = :key;

-- name: delete_steps
DELETE FROM workflow_steps WHERE account = :account AND workflow = :workflow AND instance = :id;

-- name: delete_steps_from
DELETE FROM workflow_steps WHERE account = :account AND workflow = :workflow AND instance = :id AND seq >= :seq;

-- name: insert_event
INSERT INTO workflow_events (account, workflow, instance, type, payload, timestamp_ms)
VALUES (:account, :workflow, :id, :type, :payload, :now);

-- name: oldest_event
SELECT seq, payload, timestamp_ms FROM workflow_events
WHERE account = :account AND workflow = :workflow AND instance = :id AND type = :type AND consumed_by IS NULL
ORDER BY seq LIMIT 1;

-- name: awaited_event
-- The oldest unused event of the type the instance waits for (none if it waits for none).
SELECT seq, payload, timestamp_ms FROM workflow_events
WHERE account = :account AND workflow = :workflow AND instance = :id AND consumed_by IS NULL
    AND type = (SELECT waiting_for FROM workflow_instances WHERE account = :account AND workflow = :workflow AND id = :id)
ORDER BY seq LIMIT 1;

-- name: consume_event
UPDATE workflow_events SET consumed_by = :step_key WHERE seq = :seq;

-- name: unconsume_events_from
UPDATE workflow_events SET consumed_by = NULL
WHERE account = :account AND workflow = :workflow AND instance = :id AND consumed_by IN (
    SELECT key FROM workflow_steps WHERE account = :account AND workflow = :workflow AND instance = :id AND seq >= :seq);

-- name: delete_events
DELETE FROM workflow_events WHERE account = :account AND workflow = :workflow AND instance = :id;

-- name: expired_instances
SELECT i.account, i.workflow, i.id FROM workflow_instances i
JOIN workflows w ON w.account = i.account AND w.name = i.workflow
WHERE i.ended_ms IS NOT NULL AND (
    (i.status = 'complete' AND i.ended_ms + w.success_retention_ms <= :now)
    OR (i.status IN ('errored', 'terminated') AND i.ended_ms + w.error_retention_ms <= :now))
LIMIT 1000;

-- name: overdue_instances
SELECT account, workflow, id, status, params, output, error, trace_id, version_id, epoch, run_message, wake_at_ms,
    waiting_for, paused_at_ms, resume_status, created_ms, modified_ms, started_ms, ended_ms, scheduled_ms, traceparent, origin,
    run_token
FROM workflow_instances
WHERE (status = 'waiting' AND wake_at_ms < :before) OR (status IN ('queued', 'running', 'waitingForPause') AND modified_ms < :before)
LIMIT :limit;

-- name: put_schedule
INSERT INTO workflow_schedules (account, workflow, last_tick_ms) VALUES (:account, :workflow, :now)
ON CONFLICT (account, workflow) DO NOTHING;

-- name: drop_schedule
DELETE FROM workflow_schedules WHERE account = :account AND workflow = :workflow;

-- name: list_schedules
SELECT s.account, s.workflow, w.settings, s.last_tick_ms FROM workflow_schedules s
JOIN workflows w ON w.account = s.account AND w.name = s.workflow
ORDER BY s.account, s.workflow;

-- name: claim_tick
UPDATE workflow_schedules SET last_tick_ms = :tick
WHERE account = :account AND workflow = :workflow AND last_tick_ms < :tick;

-- name: instances_by_trace
SELECT account, workflow, id, status, params, output, error, trace_id, version_id, epoch, run_message, wake_at_ms,
    waiting_for, paused_at_ms, resume_status, created_ms, modified_ms, started_ms, ended_ms, scheduled_ms, traceparent, origin,
    run_token
FROM workflow_instances WHERE account = :account AND trace_id = :trace_id
ORDER BY created_ms, workflow, id LIMIT :limit;

-- name: add_to_counter
INSERT INTO workflow_counters (account, name, value, modified_ms) VALUES (:account, :counter, :n, :now)
ON CONFLICT (account, name) DO UPDATE SET value = workflow_counters.value + excluded.value,
    modified_ms = excluded.modified_ms
RETURNING value;

-- name: counter_value
SELECT value FROM workflow_counters WHERE account = :account AND name = :counter;

-- name: take_counter_key
INSERT INTO workflow_counter_keys (account, counter, key) VALUES (:account, :counter, :key)
ON CONFLICT (account, counter, key) DO NOTHING;

-- name: forget_counter_key
DELETE FROM workflow_counter_keys WHERE account = :account AND counter = :counter AND key = :key;

-- name: insert_notice
INSERT INTO workflow_counter_notices (account, counter, workflow, instance, event_type)
VALUES (:account, :counter, :workflow, :instance, :event_type)
ON CONFLICT (account, counter, workflow, instance, event_type) DO NOTHING;

-- name: unsent_notices
SELECT workflow, instance, event_type FROM workflow_counter_notices
WHERE account = :account AND counter = :counter AND sent_ms IS NULL ORDER BY workflow, instance, event_type;

-- name: mark_notice_sent
UPDATE workflow_counter_notices SET sent_ms = :now
WHERE account = :account AND counter = :counter AND workflow = :workflow AND instance = :instance AND event_type = :event_type;

-- name: delete_counter
DELETE FROM workflow_counters WHERE account = :account AND name = :counter;

-- name: delete_counter_keys
DELETE FROM workflow_counter_keys WHERE account = :account AND counter = :counter;

-- name: delete_notices
DELETE FROM workflow_counter_notices WHERE account = :account AND counter = :counter;

-- name: insert_wakeup
INSERT INTO workflow_wakeups (account, workflow, instance, created_ms) VALUES (:account, :workflow, :id, :now)
RETURNING seq;

-- name: delete_wakeup
DELETE FROM workflow_wakeups WHERE account = :account AND seq = :seq;

-- name: owed_wakeups
SELECT seq, account, workflow, instance FROM workflow_wakeups WHERE created_ms < :before ORDER BY seq LIMIT :limit;
