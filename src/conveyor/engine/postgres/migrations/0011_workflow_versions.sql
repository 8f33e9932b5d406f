-- Version 11: a workflow record keeps the code's settings (as its worker registered them) apart
-- from the settings a PUT gave (overrides), and every version a workflow had is kept. `settings`
-- stays what is in force: the code's with the overrides applied.
ALTER TABLE workflows ADD COLUMN code_settings text;          -- NULL: no worker registered code yet
ALTER TABLE workflows ADD COLUMN code_version text NOT NULL DEFAULT '';
ALTER TABLE workflows ADD COLUMN overrides text NOT NULL DEFAULT '{}';
UPDATE workflows SET code_settings = settings, code_version = version_id;
CREATE TABLE workflow_versions (
    account     text NOT NULL,
    workflow    text NOT NULL,
    id          text NOT NULL,
    settings    text NOT NULL,
    class_name  text NOT NULL,
    script_name text NOT NULL,
    has_code    boolean NOT NULL,
    created_ms  bigint NOT NULL,  -- when first in force
    modified_ms bigint NOT NULL,  -- when last put in force
    PRIMARY KEY (account, workflow, id)
);
CREATE INDEX workflow_versions_by_modified ON workflow_versions (account, workflow, modified_ms);
INSERT INTO workflow_versions (account, workflow, id, settings, class_name, script_name, has_code, created_ms, modified_ms)
SELECT account, name, version_id, settings,
    split_part(settings::json->>'script_name', ':', 2), split_part(settings::json->>'script_name', ':', 1),
    true, modified_ms, modified_ms
FROM workflows;
CREATE INDEX workflow_instances_by_status ON workflow_instances (account, workflow, status);
