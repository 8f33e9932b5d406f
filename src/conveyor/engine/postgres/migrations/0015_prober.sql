-- Version 15: the prober's tables (conveyor.prober; SQLite keeps the same tables in prober.db,
-- prober/sqlite_schema.sql, where each is described; both run prober/queries.sql). The partial
-- unique indexes keep the claim rules: one open job per target, and per host.
CREATE TABLE prober_fleets (
    account text NOT NULL,
    fleet text NOT NULL,
    created_ms bigint NOT NULL,
    registered_ms bigint,
    checks text NOT NULL,
    messages bigint,
    per_message bigint,
    at_a_time bigint,
    schedule text,
    lease_ms bigint,
    PRIMARY KEY (account, fleet)
);
CREATE TABLE prober_targets (
    id text PRIMARY KEY,
    account text NOT NULL,
    fleet text NOT NULL,
    address text NOT NULL,
    host text NOT NULL,
    check_name text NOT NULL,
    interval_ms bigint NOT NULL,
    added_ms bigint NOT NULL,
    due_ms bigint NOT NULL,
    last_job text,
    UNIQUE (account, fleet, address, check_name)
);
CREATE INDEX prober_targets_due ON prober_targets (account, fleet, due_ms);
CREATE TABLE prober_rounds (
    account text NOT NULL,
    fleet text NOT NULL,
    id text NOT NULL,
    trigger text NOT NULL,
    mark_ms bigint NOT NULL,
    claimed_ms bigint NOT NULL,
    messages bigint NOT NULL,
    per_message bigint NOT NULL,
    at_a_time bigint NOT NULL,
    jobs bigint NOT NULL,
    PRIMARY KEY (account, fleet, id)
);
CREATE INDEX prober_rounds_by_time ON prober_rounds (account, fleet, claimed_ms);
CREATE TABLE prober_jobs (
    id text PRIMARY KEY,
    account text NOT NULL,
    fleet text NOT NULL,
    round_id text NOT NULL,
    target_id text NOT NULL,
    address text NOT NULL,
    host text NOT NULL,
    check_name text NOT NULL,
    slot bigint NOT NULL,
    mark_ms bigint NOT NULL,
    state text NOT NULL,
    claimed_ms bigint NOT NULL,
    lease_until_ms bigint NOT NULL,
    started_ms bigint,
    ended_ms bigint,
    runner text,
    ok bigint,
    latency_ms bigint,
    error text,
    detail text
);
CREATE UNIQUE INDEX prober_jobs_open_target ON prober_jobs (target_id) WHERE state IN ('claimed', 'running');
CREATE UNIQUE INDEX prober_jobs_open_host ON prober_jobs (account, fleet, host) WHERE state IN ('claimed', 'running');
CREATE INDEX prober_jobs_lease ON prober_jobs (lease_until_ms) WHERE state IN ('claimed', 'running');
CREATE INDEX prober_jobs_by_round ON prober_jobs (account, fleet, round_id);
CREATE INDEX prober_jobs_by_time ON prober_jobs (account, fleet, claimed_ms);
