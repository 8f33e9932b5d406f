-- API tokens of `conveyor serve`, in the deployment's catalog.db (the server package makes the table:
-- `create_table` runs whenever a token store opens, so an existing catalog gains it in place).

-- name: create_table
CREATE TABLE IF NOT EXISTS tokens (
    token_id   TEXT PRIMARY KEY,
    hash       TEXT NOT NULL UNIQUE,  -- SHA-256 of the secret; the secret itself is never stored
    account_id TEXT NOT NULL,         -- '' for an operator token
    read_only  INTEGER NOT NULL,
    queues     TEXT NOT NULL,         -- JSON list of queue names; [] means every queue of the account
    operator   INTEGER NOT NULL,
    created_on TEXT NOT NULL
);

-- name: insert
INSERT INTO tokens (token_id, hash, account_id, read_only, queues, operator, created_on)
VALUES (:token_id, :hash, :account_id, :read_only, :queues, :operator, :created_on)
ON CONFLICT DO NOTHING;

-- name: find
SELECT token_id, account_id, read_only, queues, operator, created_on FROM tokens WHERE hash = :hash;

-- name: all
SELECT token_id, account_id, read_only, queues, operator, created_on FROM tokens ORDER BY created_on, token_id;

-- name: delete
DELETE FROM tokens WHERE token_id = :token_id;
