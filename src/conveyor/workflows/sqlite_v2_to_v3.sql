-- workflows.db, version 2 -> 3: a record keeps the code's settings (as its worker registered them)
-- apart from the settings a PUT gave (overrides), and every version a workflow had is kept.
-- `settings` stays what is in force: the code's with the overrides applied.
ALTER TABLE workflows ADD COLUMN code_settings TEXT;          -- NULL: no worker registered code yet
ALTER TABLE workflows ADD COLUMN code_version TEXT NOT NULL DEFAULT '';
ALTER TABLE workflows ADD COLUMN overrides TEXT NOT NULL DEFAULT '{}';
UPDATE workflows SET code_settings = settings, code_version = version_id;
CREATE TABLE workflow_versions (
    account     TEXT NOT NULL,
    workflow    TEXT NOT NULL,
    id          TEXT NOT NULL,
    settings    TEXT NOT NULL,
    class_name  TEXT NOT NULL,
    script_name TEXT NOT NULL,
    has_code    INTEGER NOT NULL,
    created_ms  INTEGER NOT NULL,  -- when first in force
    modified_ms INTEGER NOT NULL,  -- when last put in force
    PRIMARY KEY (account, workflow, id)
);
CREATE INDEX workflow_versions_by_modified ON workflow_versions (account, workflow, modified_ms);
INSERT INTO workflow_versions (account, workflow, id, settings, class_name, script_name, has_code, created_ms, modified_ms)
SELECT account, name, version_id, settings,
    substr(json_extract(settings, '$.script_name'), instr(json_extract(settings, '$.script_name'), ':') + 1),
    substr(json_extract(settings, '$.script_name'), 1, instr(json_extract(settings, '$.script_name'), ':') - 1),
    1, modified_ms, modified_ms
FROM workflows;
CREATE INDEX workflow_instances_by_status ON workflow_instances (account, workflow, status);
PRAGMA user_version = 3;
