-- The dashboard's session-signing key, in the deployment's catalog.db (made in place on first use,
-- like the tokens table): every server on the directory signs and accepts the same sessions.

-- name: create_table
CREATE TABLE IF NOT EXISTS dashboard_secrets (
    name       TEXT PRIMARY KEY,
    secret     TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);

-- name: offer
INSERT OR IGNORE INTO dashboard_secrets (name, secret, created_ms) VALUES (:name, :secret, :now);

-- name: read
SELECT secret FROM dashboard_secrets WHERE name = :name;
