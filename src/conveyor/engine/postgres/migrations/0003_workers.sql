-- Version 3: the worker registry (`conveyor workers list`): one row per live worker process.
-- `registered_by` is the account whose token registered a remote worker ('' for the operator's own
-- processes); `runs` is JSON: [{queue_id, queue_name, script_name, max_concurrency, concurrency}].
CREATE TABLE workers (
    worker_id     text PRIMARY KEY,
    registered_by text NOT NULL,
    host          text NOT NULL,
    pid           integer NOT NULL,
    started_ms    bigint NOT NULL,
    heartbeat_ms  bigint NOT NULL,
    runs          text NOT NULL
);
