-- Version 7: workflows (conveyor.workflows): records, instances (ids never reused), steps, buffered events.
-- Times are milliseconds since the epoch; params, outputs, errors, attempts and configs JSON text.
CREATE TABLE workflows (
    account              text NOT NULL,
    name                 text NOT NULL,
    settings             text NOT NULL,
    version_id           text NOT NULL,
    success_retention_ms bigint NOT NULL,
    error_retention_ms   bigint NOT NULL,
    created_ms           bigint NOT NULL,
    modified_ms          bigint NOT NULL,
    PRIMARY KEY (account, name)
);
-- Every id an instance ever had, kept after delete and pruning: ids are never reused.
CREATE TABLE workflow_instance_ids (
    account  text NOT NULL,
    workflow text NOT NULL,
    id       text NOT NULL,
    PRIMARY KEY (account, workflow, id)
);
CREATE TABLE workflow_instances (
    account       text NOT NULL,
    workflow      text NOT NULL,
    id            text NOT NULL,
    status        text NOT NULL,
    params        text NOT NULL,
    output        text,
    error         text,
    trace_id      text NOT NULL,
    version_id    text NOT NULL,
    epoch         bigint NOT NULL,
    run_message   text,
    wake_at_ms    bigint,
    waiting_for   text,
    paused_at_ms  bigint,
    resume_status text,
    created_ms    bigint NOT NULL,
    modified_ms   bigint NOT NULL,
    started_ms    bigint,
    ended_ms      bigint,
    PRIMARY KEY (account, workflow, id)
);
CREATE INDEX workflow_instances_by_created ON workflow_instances (account, workflow, created_ms, id);
CREATE INDEX workflow_instances_by_end ON workflow_instances (ended_ms) WHERE ended_ms IS NOT NULL;
CREATE TABLE workflow_steps (
    account    text NOT NULL,
    workflow   text NOT NULL,
    instance   text NOT NULL,
    key        text NOT NULL,
    seq        bigint NOT NULL,
    type       text NOT NULL,
    name       text NOT NULL,
    status     text NOT NULL,
    output     text,
    attempts   text NOT NULL,
    config     text NOT NULL,
    start_ms   bigint NOT NULL,
    end_ms     bigint,
    PRIMARY KEY (account, workflow, instance, key)
);
CREATE TABLE workflow_events (
    seq          bigserial PRIMARY KEY,
    account      text NOT NULL,
    workflow     text NOT NULL,
    instance     text NOT NULL,
    type         text NOT NULL,
    payload      text NOT NULL,
    timestamp_ms bigint NOT NULL,
    consumed_by  text
);
CREATE INDEX workflow_events_waiting ON workflow_events (account, workflow, instance, type, seq)
    WHERE consumed_by IS NULL;
