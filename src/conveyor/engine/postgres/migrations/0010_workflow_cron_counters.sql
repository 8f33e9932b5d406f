-- Version 10: workflows' cron triggers (the last tick each scheduled workflow started, and the tick
-- that started an instance) and counters (conveyor.Counter) with the wake-ups they owe.
CREATE TABLE workflow_schedules (
    account      text NOT NULL,
    workflow     text NOT NULL,
    last_tick_ms bigint NOT NULL,
    PRIMARY KEY (account, workflow)
);
ALTER TABLE workflow_instances ADD COLUMN scheduled_ms bigint;
CREATE TABLE workflow_counters (
    account     text NOT NULL,
    name        text NOT NULL,
    value       bigint NOT NULL,
    modified_ms bigint NOT NULL,
    PRIMARY KEY (account, name)
);
-- The keys of the adds applied to a counter: an add with a key is applied once.
CREATE TABLE workflow_counter_keys (
    account text NOT NULL,
    counter text NOT NULL,
    key     text NOT NULL,
    PRIMARY KEY (account, counter, key)
);
-- notify_at_zero's registrations; sent_ms is set when the event was sent (each is sent once).
CREATE TABLE workflow_counter_notices (
    account    text NOT NULL,
    counter    text NOT NULL,
    workflow   text NOT NULL,
    instance   text NOT NULL,
    event_type text NOT NULL,
    sent_ms    bigint,
    PRIMARY KEY (account, counter, workflow, instance, event_type)
);
-- Wake-up messages owed for events written in a transaction: deleted once sent; the coordinator
-- sends those left behind by a process that died first.
CREATE TABLE workflow_wakeups (
    seq        bigserial PRIMARY KEY,
    account    text NOT NULL,
    workflow   text NOT NULL,
    instance   text NOT NULL,
    created_ms bigint NOT NULL
);
