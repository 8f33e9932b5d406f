-- workflows.db version 4: an instance records the traceparent it was created in and its origin
-- (the instance and step, or the queue message, that created it), and instances are found by
-- trace id (`conveyor trace ID`). Runs in the transaction that opens the file.
ALTER TABLE workflow_instances ADD COLUMN traceparent TEXT;
ALTER TABLE workflow_instances ADD COLUMN origin TEXT;
CREATE INDEX workflow_instances_by_trace ON workflow_instances (account, trace_id);
PRAGMA user_version = 4;
