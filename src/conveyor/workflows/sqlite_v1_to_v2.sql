-- workflows.db, version 1 to 2: cron triggers (the last tick each scheduled workflow started, and
-- the tick that started an instance) and counters (conveyor.Counter) with the wake-ups they owe.
CREATE TABLE workflow_schedules (
    account      TEXT NOT NULL,
    workflow     TEXT NOT NULL,
    last_tick_ms INTEGER NOT NULL,
    PRIMARY KEY (account, workflow)
);
ALTER TABLE workflow_instances ADD COLUMN scheduled_ms INTEGER;
CREATE TABLE workflow_counters (
    account     TEXT NOT NULL,
    name        TEXT NOT NULL,
    value       INTEGER NOT NULL,
    modified_ms INTEGER NOT NULL,
    PRIMARY KEY (account, name)
);
-- The keys of the adds applied to a counter: an add with a key is applied once.
CREATE TABLE workflow_counter_keys (
    account TEXT NOT NULL,
    counter TEXT NOT NULL,
    key     TEXT NOT NULL,
    PRIMARY KEY (account, counter, key)
);
-- notify_at_zero's registrations; sent_ms is set when the event was sent (each is sent once).
CREATE TABLE workflow_counter_notices (
    account    TEXT NOT NULL,
    counter    TEXT NOT NULL,
    workflow   TEXT NOT NULL,
    instance   TEXT NOT NULL,
    event_type TEXT NOT NULL,
    sent_ms    INTEGER,
    PRIMARY KEY (account, counter, workflow, instance, event_type)
);
-- Wake-up messages owed for events written in a transaction: deleted once sent; the coordinator
-- sends those left behind by a process that died first.
CREATE TABLE workflow_wakeups (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    account    TEXT NOT NULL,
    workflow   TEXT NOT NULL,
    instance   TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);
PRAGMA user_version = 2;
