-- Version 14: a workflow instance records the traceparent it was created in and its origin (JSON:
-- the instance and step, or the queue message, that created it), and instances are found by trace
-- id (`conveyor trace ID`).
ALTER TABLE workflow_instances ADD COLUMN traceparent text;
ALTER TABLE workflow_instances ADD COLUMN origin text;
CREATE INDEX workflow_instances_by_trace ON workflow_instances (account, trace_id);
