-- Version 22: instances listed by status page in creation order from an index (the dashboard's
-- and the REST list's status filter), instead of walking every instance of the workflow by
-- creation time to find the few of a rare status. (workflow_instances_by_status, of migration 11,
-- is this index's prefix; it stays for the databases and tests that name it.)
CREATE INDEX workflow_instances_by_status_created ON workflow_instances (account, workflow, status, created_ms, id);
