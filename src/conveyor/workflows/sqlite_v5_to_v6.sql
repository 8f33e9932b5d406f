-- workflows.db version 6: an instance records the token of the claim that started its current run;
-- a run's writes are fenced by the claim's epoch and this token together (see
-- SqlWorkflowStore.claim). Runs in the transaction that opens the file.
ALTER TABLE workflow_instances ADD COLUMN run_token TEXT;
PRAGMA user_version = 6;
