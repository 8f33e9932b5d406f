-- The prober's tables in a SQLite deployment's prober.db (version 1). PostgreSQL has the same
-- tables in migration 0015_prober.sql; both run the named queries of queries.sql.
PRAGMA application_id = 1131376246;  -- 'Conv': marks the file as Conveyor's
PRAGMA user_version = 1;

-- A fleet: what the worker running it registered last (its checks as a JSON list of names, its
-- round shape and schedule); a fleet no worker registered yet knows only the built-in check.
CREATE TABLE prober_fleets (
    account TEXT NOT NULL,
    fleet TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    registered_ms INTEGER,
    checks TEXT NOT NULL,
    messages INTEGER,
    per_message INTEGER,
    at_a_time INTEGER,
    schedule TEXT,
    lease_ms INTEGER,
    PRIMARY KEY (account, fleet)
);

-- A target: an address (a URL, or what its check understands), the host it counts against (no
-- host has two jobs in flight), the name of its check, and its own interval. due_ms: when it may
-- be claimed next; last_job: the job that claimed it last.
CREATE TABLE prober_targets (
    id TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    fleet TEXT NOT NULL,
    address TEXT NOT NULL,
    host TEXT NOT NULL,
    check_name TEXT NOT NULL,
    interval_ms INTEGER NOT NULL,
    added_ms INTEGER NOT NULL,
    due_ms INTEGER NOT NULL,
    last_job TEXT,
    UNIQUE (account, fleet, address, check_name)
);
CREATE INDEX prober_targets_due ON prober_targets (account, fleet, due_ms);

-- A round: its trigger (cron, now, round), its mark (the cron tick, or when it was asked for),
-- when its claim committed, the shape it fanned out in, and how many jobs it claimed.
CREATE TABLE prober_rounds (
    account TEXT NOT NULL,
    fleet TEXT NOT NULL,
    id TEXT NOT NULL,
    trigger TEXT NOT NULL,
    mark_ms INTEGER NOT NULL,
    claimed_ms INTEGER NOT NULL,
    messages INTEGER NOT NULL,
    per_message INTEGER NOT NULL,
    at_a_time INTEGER NOT NULL,
    jobs INTEGER NOT NULL,
    PRIMARY KEY (account, fleet, id)
);
CREATE INDEX prober_rounds_by_time ON prober_rounds (account, fleet, claimed_ms);

-- A job: one check of one target in one round. state: claimed -> running -> finished, or
-- abandoned (its lease ran out: found by the sweeper) or cancelled (never started: its target was
-- removed, or its round's messages could not be sent). The target's address, host and check are
-- copied, so the history outlives the target. slot: the round's message that carries it; runner:
-- the token of the attempt that started it (only that attempt may finish it).
CREATE TABLE prober_jobs (
    id TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    fleet TEXT NOT NULL,
    round_id TEXT NOT NULL,
    target_id TEXT NOT NULL,
    address TEXT NOT NULL,
    host TEXT NOT NULL,
    check_name TEXT NOT NULL,
    slot INTEGER NOT NULL,
    mark_ms INTEGER NOT NULL,
    state TEXT NOT NULL,
    claimed_ms INTEGER NOT NULL,
    lease_until_ms INTEGER NOT NULL,
    started_ms INTEGER,
    ended_ms INTEGER,
    runner TEXT,
    ok INTEGER,
    latency_ms INTEGER,
    error TEXT,
    detail TEXT
);
-- The rules, kept by the database however many claimers race: a target has at most one open job,
-- and so has a host.
CREATE UNIQUE INDEX prober_jobs_open_target ON prober_jobs (target_id) WHERE state IN ('claimed', 'running');
CREATE UNIQUE INDEX prober_jobs_open_host ON prober_jobs (account, fleet, host) WHERE state IN ('claimed', 'running');
CREATE INDEX prober_jobs_lease ON prober_jobs (lease_until_ms) WHERE state IN ('claimed', 'running');
CREATE INDEX prober_jobs_by_round ON prober_jobs (account, fleet, round_id);
CREATE INDEX prober_jobs_by_time ON prober_jobs (account, fleet, claimed_ms);
