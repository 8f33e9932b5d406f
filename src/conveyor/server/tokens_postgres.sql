-- API tokens of `conveyor serve`, in the deployment's schema (the table: migrations/0004_tokens.sql).

-- name: insert
INSERT INTO tokens (token_id, hash, account_id, read_only, queues, operator, created_on)
VALUES (%(token_id)s, %(hash)s, %(account_id)s, %(read_only)s, %(queues)s, %(operator)s, %(created_on)s)
ON CONFLICT DO NOTHING;

-- name: find
SELECT token_id, account_id, read_only, queues, operator, created_on FROM tokens WHERE hash = %(hash)s;

-- name: all
SELECT token_id, account_id, read_only, queues, operator, created_on FROM tokens ORDER BY created_on, token_id;

-- name: delete
DELETE FROM tokens WHERE token_id = %(token_id)s;
