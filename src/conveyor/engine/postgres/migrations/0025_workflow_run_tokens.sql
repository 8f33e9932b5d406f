-- Version 25: an instance records the token of the claim that started its current run. A run's
-- writes are fenced by the claim's epoch and this token together, so a claim may commit without
-- waiting for its WAL flush: one lost in a crash of the server lets the message's next delivery
-- claim the same epoch again, but not with the same token (see SqlWorkflowStore.claim).
ALTER TABLE workflow_instances ADD COLUMN run_token text;
