-- Version 21: the dashboard's tables.
-- queue_history: each queue's figures, recorded by the coordinator every few seconds and kept a
-- day by default (conveyor.engine.history); the dashboard's charts and `conveyor queues info
-- --history` read it, never the queues' messages.
CREATE TABLE queue_history (
    queue_id      text NOT NULL,
    queue_name    text NOT NULL,
    at_ms         bigint NOT NULL,
    backlog       bigint NOT NULL,
    backlog_bytes bigint NOT NULL,
    oldest_ms     bigint NOT NULL,
    in_flight     bigint NOT NULL,
    sent          bigint NOT NULL,
    acked         bigint NOT NULL,
    retried       bigint NOT NULL,
    dead_lettered bigint NOT NULL,
    concurrency   integer NOT NULL,
    PRIMARY KEY (queue_name, at_ms)
);
CREATE INDEX queue_history_at ON queue_history (at_ms);

-- dashboard_secrets: the key that signs the dashboard's session cookies, made once per deployment
-- so every server on the database accepts the sessions of the others.
CREATE TABLE dashboard_secrets (
    name       text PRIMARY KEY,
    secret     text NOT NULL,
    created_ms bigint NOT NULL
);
