-- The prober's named queries, run on SQLite (prober.db) and PostgreSQL (migration 0015) alike.
-- Every state transition of a target or a job is one of these, inside ProbeStore's transactions.

-- name: fleet
SELECT account, fleet, created_ms, registered_ms, checks, messages, per_message, at_a_time, schedule, lease_ms
FROM prober_fleets WHERE account = :account AND fleet = :fleet;

-- name: fleets_of_account
SELECT account, fleet, created_ms, registered_ms, checks, messages, per_message, at_a_time, schedule, lease_ms
FROM prober_fleets WHERE account = :account ORDER BY fleet;

-- name: insert_fleet
INSERT INTO prober_fleets (account, fleet, created_ms, checks)
VALUES (:account, :fleet, :now, :checks)
ON CONFLICT DO NOTHING;

-- name: register_fleet
UPDATE prober_fleets
SET registered_ms = :now, checks = :checks, messages = :messages, per_message = :per_message,
    at_a_time = :at_a_time, schedule = :schedule, lease_ms = :lease_ms
WHERE account = :account AND fleet = :fleet;

-- name: insert_target
INSERT INTO prober_targets (id, account, fleet, address, host, check_name, interval_ms, added_ms, due_ms)
VALUES (:id, :account, :fleet, :address, :host, :check_name, :interval_ms, :now, :now)
ON CONFLICT DO NOTHING;

-- name: targets
SELECT t.id, t.address, t.host, t.check_name, t.interval_ms, t.added_ms, t.due_ms,
       j.state, j.ended_ms, j.ok, j.latency_ms, j.error
FROM prober_targets t LEFT JOIN prober_jobs j ON j.id = t.last_job
WHERE t.account = :account AND t.fleet = :fleet
ORDER BY t.address, t.check_name;

-- name: target_by_id
SELECT id, address, check_name FROM prober_targets WHERE account = :account AND fleet = :fleet AND id = :id;

-- name: targets_by_address
SELECT id, address, check_name FROM prober_targets
WHERE account = :account AND fleet = :fleet AND address = :address ORDER BY check_name;

-- name: delete_target
DELETE FROM prober_targets WHERE id = :id;

-- name: cancel_target_jobs
UPDATE prober_jobs SET state = 'cancelled', ended_ms = :now WHERE target_id = :id AND state = 'claimed';

-- name: sweep_fleet
UPDATE prober_jobs SET state = 'abandoned', ended_ms = :now
WHERE state IN ('claimed', 'running') AND lease_until_ms <= :now AND account = :account AND fleet = :fleet;

-- name: round
SELECT id, trigger, mark_ms, claimed_ms, messages, per_message, at_a_time, jobs
FROM prober_rounds WHERE account = :account AND fleet = :fleet AND id = :id;

-- name: insert_round
INSERT INTO prober_rounds (account, fleet, id, trigger, mark_ms, claimed_ms, messages, per_message, at_a_time, jobs)
VALUES (:account, :fleet, :id, :trigger, :mark_ms, :now, :messages, :per_message, :at_a_time, 0);

-- name: count_round_jobs
UPDATE prober_rounds SET jobs = :jobs WHERE account = :account AND fleet = :fleet AND id = :id;

-- Due targets whose host has no open job, the most overdue first, one per host.
-- name: claimable
SELECT id, host FROM (
    SELECT t.id, t.host, t.due_ms, ROW_NUMBER() OVER (PARTITION BY t.host ORDER BY t.due_ms, t.id) AS nth
    FROM prober_targets t
    WHERE t.account = :account AND t.fleet = :fleet AND t.due_ms <= :now
      AND NOT EXISTS (
          SELECT 1 FROM prober_jobs j
          WHERE j.account = :account AND j.fleet = :fleet AND j.host = t.host AND j.state IN ('claimed', 'running'))
) AS first_of_host
WHERE nth = 1
ORDER BY due_ms, id
LIMIT :limit;

-- Fails (no row) when the target or its host has an open job: the partial unique indexes.
-- name: insert_job
INSERT INTO prober_jobs (id, account, fleet, round_id, target_id, address, host, check_name, slot, mark_ms, state,
                         claimed_ms, lease_until_ms)
SELECT :id, account, fleet, :round_id, id, address, host, check_name, :slot, :mark_ms, 'claimed', :now, :lease_until
FROM prober_targets WHERE id = :target_id
ON CONFLICT DO NOTHING;

-- Takes the target's row (PostgreSQL: its lock) and checks it is still due: a claimer that read
-- it before another job's finish moved it on finds it no longer due here.
-- name: take_target
UPDATE prober_targets SET last_job = :job WHERE id = :target_id AND due_ms <= :now;

-- The claim's time, read once the job's rows are taken (after any wait for another claimer).
-- name: stamp_job
UPDATE prober_jobs SET claimed_ms = :now, lease_until_ms = :lease_until WHERE id = :id;

-- name: drop_job
DELETE FROM prober_jobs WHERE id = :id AND state = 'claimed';

-- name: round_jobs
SELECT id, slot, state FROM prober_jobs WHERE account = :account AND fleet = :fleet AND round_id = :round_id
ORDER BY slot, id;

-- name: cancel_round
UPDATE prober_jobs SET state = 'cancelled', ended_ms = :now
WHERE account = :account AND fleet = :fleet AND round_id = :round_id AND state = 'claimed';

-- name: start_job
UPDATE prober_jobs SET state = 'running', started_ms = :now, lease_until_ms = :lease_until, runner = :runner
WHERE id = :id AND state = 'claimed' AND lease_until_ms > :now;

-- The jobs of one message not started yet: alive while their invocation is.
-- name: renew_slot
UPDATE prober_jobs SET lease_until_ms = :lease_until
WHERE account = :account AND fleet = :fleet AND round_id = :round_id AND slot = :slot AND state = 'claimed'
  AND lease_until_ms > :now;

-- name: job
SELECT id, account, fleet, round_id, target_id, address, host, check_name, slot, mark_ms, state, claimed_ms,
       lease_until_ms, started_ms, ended_ms, runner, ok, latency_ms, error, detail
FROM prober_jobs WHERE id = :id;

-- name: finish_job
UPDATE prober_jobs
SET state = 'finished', ended_ms = :now, ok = :ok, latency_ms = :latency_ms, error = :error, detail = :detail
WHERE id = :id AND state = 'running' AND runner = :runner;

-- name: schedule_target
UPDATE prober_targets SET due_ms = :mark_ms + interval_ms WHERE id = :target_id AND last_job = :job;

-- name: jobs_since
SELECT id, account, fleet, round_id, target_id, address, host, check_name, slot, mark_ms, state, claimed_ms,
       lease_until_ms, started_ms, ended_ms, runner, ok, latency_ms, error, detail
FROM prober_jobs WHERE account = :account AND fleet = :fleet AND claimed_ms >= :since
ORDER BY claimed_ms, id;

-- name: rounds_since
SELECT id, trigger, mark_ms, claimed_ms, messages, per_message, at_a_time, jobs
FROM prober_rounds WHERE account = :account AND fleet = :fleet AND claimed_ms >= :since
ORDER BY claimed_ms, id;

-- name: listed_targets
SELECT id, added_ms FROM prober_targets WHERE account = :account AND fleet = :fleet;

-- name: jobs_of_round
SELECT id, account, fleet, round_id, target_id, address, host, check_name, slot, mark_ms, state, claimed_ms,
       lease_until_ms, started_ms, ended_ms, runner, ok, latency_ms, error, detail
FROM prober_jobs WHERE account = :account AND fleet = :fleet AND round_id = :round_id
ORDER BY slot, id;
