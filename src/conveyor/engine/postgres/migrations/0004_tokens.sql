-- Version 4: the API tokens of `conveyor serve` belong to the deployment, so every server on this
-- database accepts the same ones (they used to live in a tokens.db file per server).
CREATE TABLE tokens (
    token_id   text PRIMARY KEY,
    hash       text NOT NULL UNIQUE,  -- SHA-256 of the secret; the secret itself is never stored
    account_id text NOT NULL,         -- '' for an operator token
    read_only  boolean NOT NULL,
    queues     text NOT NULL,         -- JSON list of queue names; [] means every queue of the account
    operator   boolean NOT NULL,
    created_on text NOT NULL
);
