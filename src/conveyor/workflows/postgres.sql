-- The workflow store's queries on PostgreSQL (tables of migrations/0007, 0010 and 0011); sql_store.py runs them.

-- name: upsert_workflow_code
INSERT INTO workflows (account, name, settings, version_id, success_retention_ms, error_retention_ms, created_ms,
    modified_ms, code_settings, code_version, overrides)
VALUES (%(account)s, %(name)s, %(code_settings)s, '', 0, 0, %(now)s, %(now)s, %(code_settings)s, %(code_version)s, '{}')
ON CONFLICT (account, name) DO UPDATE SET
    code_settings = excluded.code_settings, code_version = excluded.code_version, modified_ms = excluded.modified_ms;

-- name: upsert_workflow_overrides
INSERT INTO workflows (account, name, settings, version_id, success_retention_ms, error_retention_ms, created_ms,
    modified_ms, code_settings, code_version, overrides)
VALUES (%(account)s, %(name)s, %(settings)s, '', 0, 0, %(now)s, %(now)s, NULL, '', %(overrides)s)
ON CONFLICT (account, name) DO UPDATE SET overrides = excluded.overrides, modified_ms = excluded.modified_ms;

-- name: set_workflow_in_force
UPDATE workflows SET settings = %(settings)s, version_id = %(version_id)s,
    success_retention_ms = %(success_retention_ms)s, error_retention_ms = %(error_retention_ms)s
WHERE account = %(account)s AND name = %(name)s;

-- name: get_workflow
SELECT account, name, settings, version_id, created_ms, modified_ms, code_settings, overrides, code_version
FROM workflows WHERE account = %(account)s AND name = %(name)s;

-- name: lock_workflow
SELECT account, name, settings, version_id, created_ms, modified_ms, code_settings, overrides, code_version
FROM workflows WHERE account = %(account)s AND name = %(name)s FOR UPDATE;

-- name: list_workflows
SELECT account, name, settings, version_id, created_ms, modified_ms, code_settings, overrides, code_version
FROM workflows WHERE account = %(account)s ORDER BY name;

-- name: put_version
INSERT INTO workflow_versions (account, workflow, id, settings, class_name, script_name, has_code, created_ms, modified_ms)
VALUES (%(account)s, %(workflow)s, %(id)s, %(settings)s, %(class_name)s, %(script_name)s, %(has_code)s, %(now)s, %(now)s)
ON CONFLICT (account, workflow, id) DO UPDATE SET modified_ms = excluded.modified_ms;

-- name: list_versions
SELECT id, workflow, settings, class_name, script_name, has_code, created_ms, modified_ms FROM workflow_versions
WHERE account = %(account)s AND workflow = %(workflow)s
-- The version in force first (two puts in one millisecond tie on modified_ms), then the latest.
ORDER BY id = (SELECT version_id FROM workflows WHERE account = %(account)s AND name = %(workflow)s) DESC,
         modified_ms DESC, id DESC;

-- name: get_version
SELECT id, workflow, settings, class_name, script_name, has_code, created_ms, modified_ms FROM workflow_versions
WHERE account = %(account)s AND workflow = %(workflow)s AND id = %(id)s;

-- name: instance_counts
SELECT status, count(*) FROM workflow_instances
WHERE account = %(account)s AND workflow = %(workflow)s
    AND (CAST(%(start_ms)s AS bigint) IS NULL OR created_ms >= CAST(%(start_ms)s AS bigint))
    AND (CAST(%(end_ms)s AS bigint) IS NULL OR created_ms <= CAST(%(end_ms)s AS bigint))
GROUP BY status;

-- name: delete_workflow_steps
DELETE FROM workflow_steps WHERE account = %(account)s AND workflow = %(workflow)s;

-- name: delete_workflow_events
DELETE FROM workflow_events WHERE account = %(account)s AND workflow = %(workflow)s;

-- name: delete_workflow_instances
DELETE FROM workflow_instances WHERE account = %(account)s AND workflow = %(workflow)s;

-- name: delete_workflow_versions
DELETE FROM workflow_versions WHERE account = %(account)s AND workflow = %(workflow)s;

-- name: delete_workflow
DELETE FROM workflows WHERE account = %(account)s AND name = %(name)s;

-- name: instance_id_taken
SELECT 1 FROM workflow_instance_ids WHERE account = %(account)s AND workflow = %(workflow)s AND id = %(id)s;

-- name: take_instance_id
INSERT INTO workflow_instance_ids (account, workflow, id) VALUES (%(account)s, %(workflow)s, %(id)s);

-- name: insert_instance
INSERT INTO workflow_instances (account, workflow, id, status, params, output, error, trace_id, version_id, epoch,
    run_message, wake_at_ms, waiting_for, paused_at_ms, resume_status, created_ms, modified_ms, started_ms, ended_ms,
    scheduled_ms, traceparent, origin, run_token)
VALUES (%(account)s, %(workflow)s, %(id)s, %(status)s, %(params)s, %(output)s, %(error)s, %(trace_id)s, %(version_id)s, %(epoch)s,
    %(run_message)s, %(wake_at_ms)s, %(waiting_for)s, %(paused_at_ms)s, %(resume_status)s, %(created_ms)s, %(modified_ms)s, %(started_ms)s, %(ended_ms)s, %(scheduled_ms)s,
    %(traceparent)s, %(origin)s, %(run_token)s);

-- name: get_instance
SELECT account, workflow, id, status, params, output, error, trace_id, version_id, epoch, run_message, wake_at_ms,
    waiting_for, paused_at_ms, resume_status, created_ms, modified_ms, started_ms, ended_ms, scheduled_ms, traceparent, origin,
    run_token
FROM workflow_instances WHERE account = %(account)s AND workflow = %(workflow)s AND id = %(id)s;

-- name: lock_instance
SELECT account, workflow, id, status, params, output, error, trace_id, version_id, epoch, run_message, wake_at_ms,
    waiting_for, paused_at_ms, resume_status, created_ms, modified_ms, started_ms, ended_ms, scheduled_ms, traceparent, origin,
    run_token
FROM workflow_instances WHERE account = %(account)s AND workflow = %(workflow)s AND id = %(id)s FOR UPDATE;

-- name: fence_instance
-- What a run's step write needs of its instance (not its params, up to a mebibyte): who owns it.
SELECT status, epoch, run_token FROM workflow_instances
WHERE account = %(account)s AND workflow = %(workflow)s AND id = %(id)s FOR UPDATE;

-- name: finish_instance
-- A run's end, complete or errored, if the run that claimed the instance at its epoch (with its
-- token) still owns it: one statement, which reads nothing of the row (its params can be a mebibyte).
UPDATE workflow_instances SET status = %(status)s, output = %(output)s, error = %(error)s, run_message = NULL,
    wake_at_ms = NULL, waiting_for = NULL, ended_ms = %(now)s, modified_ms = %(now)s
WHERE account = %(account)s AND workflow = %(workflow)s AND id = %(id)s AND epoch = %(epoch)s
    AND run_token IS NOT DISTINCT FROM %(run_token)s AND status IN ('running', 'waitingForPause');

-- name: update_instance
-- What a run, a pause or a restart changes; params, trace_id and version_id are set when the
-- instance is made and never change (params can be a mebibyte, and the trace index is left alone).
UPDATE workflow_instances SET status = %(status)s, output = %(output)s, error = %(error)s,
    epoch = %(epoch)s, run_message = %(run_message)s, wake_at_ms = %(wake_at_ms)s,
    waiting_for = %(waiting_for)s, paused_at_ms = %(paused_at_ms)s, resume_status = %(resume_status)s,
    modified_ms = %(modified_ms)s, started_ms = %(started_ms)s, ended_ms = %(ended_ms)s,
    run_token = %(run_token)s
WHERE account = %(account)s AND workflow = %(workflow)s AND id = %(id)s;

-- name: list_instances_asc
SELECT account, workflow, id, status, params, output, error, trace_id, version_id, epoch, run_message, wake_at_ms,
    waiting_for, paused_at_ms, resume_status, created_ms, modified_ms, started_ms, ended_ms, scheduled_ms, traceparent, origin,
    run_token
FROM workflow_instances
WHERE account = %(account)s AND workflow = %(workflow)s
    AND (CAST(%(status)s AS text) IS NULL OR status = CAST(%(status)s AS text))
    AND (CAST(%(start_ms)s AS bigint) IS NULL OR created_ms >= CAST(%(start_ms)s AS bigint))
    AND (CAST(%(end_ms)s AS bigint) IS NULL OR created_ms <= CAST(%(end_ms)s AS bigint))
    AND (CAST(%(after_ms)s AS bigint) IS NULL OR created_ms > %(after_ms)s OR (created_ms = %(after_ms)s AND id > %(after_id)s))
ORDER BY created_ms, id LIMIT %(limit)s;

-- name: list_instances_of_status_asc
-- The same, of one status (a query of its own, so the planner takes the status index).
SELECT account, workflow, id, status, params, output, error, trace_id, version_id, epoch, run_message, wake_at_ms,
    waiting_for, paused_at_ms, resume_status, created_ms, modified_ms, started_ms, ended_ms, scheduled_ms, traceparent, origin,
    run_token
FROM workflow_instances
WHERE account = %(account)s AND workflow = %(workflow)s
    AND status = %(status)s
    AND (CAST(%(start_ms)s AS bigint) IS NULL OR created_ms >= CAST(%(start_ms)s AS bigint))
    AND (CAST(%(end_ms)s AS bigint) IS NULL OR created_ms <= CAST(%(end_ms)s AS bigint))
    AND (CAST(%(after_ms)s AS bigint) IS NULL OR created_ms > %(after_ms)s OR (created_ms = %(after_ms)s AND id > %(after_id)s))
ORDER BY created_ms, id LIMIT %(limit)s;

-- name: list_instances_desc
SELECT account, workflow, id, status, params, output, error, trace_id, version_id, epoch, run_message, wake_at_ms,
    waiting_for, paused_at_ms, resume_status, created_ms, modified_ms, started_ms, ended_ms, scheduled_ms, traceparent, origin,
    run_token
FROM workflow_instances
WHERE account = %(account)s AND workflow = %(workflow)s
    AND (CAST(%(status)s AS text) IS NULL OR status = CAST(%(status)s AS text))
    AND (CAST(%(start_ms)s AS bigint) IS NULL OR created_ms >= CAST(%(start_ms)s AS bigint))
    AND (CAST(%(end_ms)s AS bigint) IS NULL OR created_ms <= CAST(%(end_ms)s AS bigint))
    AND (CAST(%(after_ms)s AS bigint) IS NULL OR created_ms < %(after_ms)s OR (created_ms = %(after_ms)s AND id < %(after_id)s))
ORDER BY created_ms DESC, id DESC LIMIT %(limit)s;

-- name: list_instances_of_status_desc
-- The same, of one status (a query of its own, so the planner takes the status index).
SELECT account, workflow, id, status, params, output, error, trace_id, version_id, epoch, run_message, wake_at_ms,
    waiting_for, paused_at_ms, resume_status, created_ms, modified_ms, started_ms, ended_ms, scheduled_ms, traceparent, origin,
    run_token
FROM workflow_instances
WHERE account = %(account)s AND workflow = %(workflow)s
    AND status = %(status)s
    AND (CAST(%(start_ms)s AS bigint) IS NULL OR created_ms >= CAST(%(start_ms)s AS bigint))
    AND (CAST(%(end_ms)s AS bigint) IS NULL OR created_ms <= CAST(%(end_ms)s AS bigint))
    AND (CAST(%(after_ms)s AS bigint) IS NULL OR created_ms < %(after_ms)s OR (created_ms = %(after_ms)s AND id < %(after_id)s))
ORDER BY created_ms DESC, id DESC LIMIT %(limit)s;

-- name: delete_instance
DELETE FROM workflow_instances WHERE account = %(account)s AND workflow = %(workflow)s AND id = %(id)s;

-- name: steps
SELECT key, seq, type, name, status, output, attempts, config, start_ms, end_ms FROM workflow_steps
WHERE account = %(account)s AND workflow = %(workflow)s AND instance = %(id)s ORDER BY seq;

-- name: put_step
INSERT INTO workflow_steps (account, workflow, instance, key, seq, type, name, status, output, attempts, config, start_ms, end_ms)
VALUES (%(account)s, %(workflow)s, %(instance)s, %(key)s, %(seq)s, %(type)s, %(name)s, %(status)s, %(output)s, %(attempts)s, %(config)s, %(start_ms)s, %(end_ms)s)
ON CONFLICT (account, workflow, instance, key) DO UPDATE SET
    seq = excluded.seq, status = excluded.status, output = excluded.output, attempts = excluded.attempts,
    config = excluded.config, start_ms = excluded.start_ms, end_ms = excluded.end_ms;

-- name: step_seq
SELECT seq FROM workflow_steps WHERE account = %(account)s AND workflow = %(workflow)s AND instance = %(id)s AND key = %(key)s;

-- name: delete_steps
DELETE FROM workflow_steps WHERE account = %(account)s AND workflow = %(workflow)s AND instance = %(id)s;

-- name: delete_steps_from
DELETE FROM workflow_steps WHERE account = %(account)s AND workflow = %(workflow)s AND instance = %(id)s AND seq >= %(seq)s;

-- name: insert_event
INSERT INTO workflow_events (account, workflow, instance, type, payload, timestamp_ms)
VALUES (%(account)s, %(workflow)s, %(id)s, %(type)s, %(payload)s, %(now)s);

-- name: oldest_event
SELECT seq, payload, timestamp_ms FROM workflow_events
WHERE account = %(account)s AND workflow = %(workflow)s AND instance = %(id)s AND type = %(type)s AND consumed_by IS NULL
ORDER BY seq LIMIT 1;

-- name: awaited_event
-- The oldest unused event of the type the instance waits for (none if it waits for none).
SELECT seq, payload, timestamp_ms FROM workflow_events
WHERE account = %(account)s AND workflow = %(workflow)s AND instance = %(id)s AND consumed_by IS NULL
    AND type = (SELECT waiting_for FROM workflow_instances WHERE account = %(account)s AND workflow = %(workflow)s AND id = %(id)s)
ORDER BY seq LIMIT 1;

-- name: consume_event
UPDATE workflow_events SET consumed_by = %(step_key)s WHERE seq = %(seq)s;

-- name: unconsume_events_from
UPDATE workflow_events SET consumed_by = NULL
WHERE account = %(account)s AND workflow = %(workflow)s AND instance = %(id)s AND consumed_by IN (
    SELECT key FROM workflow_steps WHERE account = %(account)s AND workflow = %(workflow)s AND instance = %(id)s AND seq >= %(seq)s);

-- name: delete_events
DELETE FROM workflow_events WHERE account = %(account)s AND workflow = %(workflow)s AND instance = %(id)s;

-- name: expired_instances
SELECT i.account, i.workflow, i.id FROM workflow_instances i
JOIN workflows w ON w.account = i.account AND w.name = i.workflow
WHERE i.ended_ms IS NOT NULL AND (
    (i.status = 'complete' AND i.ended_ms + w.success_retention_ms <= %(now)s)
    OR (i.status IN ('errored', 'terminated') AND i.ended_ms + w.error_retention_ms <= %(now)s))
LIMIT 1000 FOR UPDATE OF i SKIP LOCKED;

-- name: overdue_instances
SELECT account, workflow, id, status, params, output, error, trace_id, version_id, epoch, run_message, wake_at_ms,
    waiting_for, paused_at_ms, resume_status, created_ms, modified_ms, started_ms, ended_ms, scheduled_ms, traceparent, origin,
    run_token
FROM workflow_instances
WHERE (status = 'waiting' AND wake_at_ms < %(before)s) OR (status IN ('queued', 'running', 'waitingForPause') AND modified_ms < %(before)s)
LIMIT %(limit)s;

-- name: put_schedule
INSERT INTO workflow_schedules (account, workflow, last_tick_ms) VALUES (%(account)s, %(workflow)s, %(now)s)
ON CONFLICT (account, workflow) DO NOTHING;

-- name: drop_schedule
DELETE FROM workflow_schedules WHERE account = %(account)s AND workflow = %(workflow)s;

-- name: list_schedules
SELECT s.account, s.workflow, w.settings, s.last_tick_ms FROM workflow_schedules s
JOIN workflows w ON w.account = s.account AND w.name = s.workflow
ORDER BY s.account, s.workflow;

-- name: claim_tick
UPDATE workflow_schedules SET last_tick_ms = %(tick)s
WHERE account = %(account)s AND workflow = %(workflow)s AND last_tick_ms < %(tick)s;

-- name: instances_by_trace
SELECT account, workflow, id, status, params, output, error, trace_id, version_id, epoch, run_message, wake_at_ms,
    waiting_for, paused_at_ms, resume_status, created_ms, modified_ms, started_ms, ended_ms, scheduled_ms, traceparent, origin,
    run_token
FROM workflow_instances WHERE account = %(account)s AND trace_id = %(trace_id)s
ORDER BY created_ms, workflow, id LIMIT %(limit)s;

-- name: add_to_counter
INSERT INTO workflow_counters (account, name, value, modified_ms) VALUES (%(account)s, %(counter)s, %(n)s, %(now)s)
ON CONFLICT (account, name) DO UPDATE SET value = workflow_counters.value + excluded.value,
    modified_ms = excluded.modified_ms
RETURNING value;

-- name: counter_value
SELECT value FROM workflow_counters WHERE account = %(account)s AND name = %(counter)s;

-- name: take_counter_key
INSERT INTO workflow_counter_keys (account, counter, key) VALUES (%(account)s, %(counter)s, %(key)s)
ON CONFLICT (account, counter, key) DO NOTHING;

-- name: forget_counter_key
DELETE FROM workflow_counter_keys WHERE account = %(account)s AND counter = %(counter)s AND key = %(key)s;

-- name: insert_notice
INSERT INTO workflow_counter_notices (account, counter, workflow, instance, event_type)
VALUES (%(account)s, %(counter)s, %(workflow)s, %(instance)s, %(event_type)s)
ON CONFLICT (account, counter, workflow, instance, event_type) DO NOTHING;

-- name: unsent_notices
SELECT workflow, instance, event_type FROM workflow_counter_notices
WHERE account = %(account)s AND counter = %(counter)s AND sent_ms IS NULL ORDER BY workflow, instance, event_type;

-- name: mark_notice_sent
UPDATE workflow_counter_notices SET sent_ms = %(now)s
WHERE account = %(account)s AND counter = %(counter)s AND workflow = %(workflow)s AND instance = %(instance)s AND event_type = %(event_type)s;

-- name: delete_counter
DELETE FROM workflow_counters WHERE account = %(account)s AND name = %(counter)s;

-- name: delete_counter_keys
DELETE FROM workflow_counter_keys WHERE account = %(account)s AND counter = %(counter)s;

-- name: delete_notices
DELETE FROM workflow_counter_notices WHERE account = %(account)s AND counter = %(counter)s;

-- name: insert_wakeup
INSERT INTO workflow_wakeups (account, workflow, instance, created_ms) VALUES (%(account)s, %(workflow)s, %(id)s, %(now)s)
RETURNING seq;

-- name: delete_wakeup
DELETE FROM workflow_wakeups WHERE account = %(account)s AND seq = %(seq)s;

-- name: owed_wakeups
SELECT seq, account, workflow, instance FROM workflow_wakeups WHERE created_ms < %(before)s ORDER BY seq LIMIT %(limit)s;
