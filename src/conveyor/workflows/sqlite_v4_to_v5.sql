-- workflows.db version 5: instances listed by status page in creation order from an index (the
-- dashboard's and the REST list's status filter), instead of walking every instance of the
-- workflow by creation time to find the few of a rare status. Runs in the transaction that opens
-- the file.
CREATE INDEX workflow_instances_by_status_created ON workflow_instances (account, workflow, status, created_ms, id);
PRAGMA user_version = 5;
