-- The dashboard's session-signing key (table of migration 0021_dashboard.sql).

-- name: offer
INSERT INTO dashboard_secrets (name, secret, created_ms) VALUES (%(name)s, %(secret)s, %(now)s)
ON CONFLICT (name) DO NOTHING;

-- name: read
SELECT secret FROM dashboard_secrets WHERE name = %(name)s;
