-- The statements of the PostgreSQL engine's own sessions, outside the message and catalog
-- transitions (queries.sql): migrations, leadership, wake-ups, vacuuming. Parameters are %(name)s;
-- {name} marks an identifier the code fills in (psycopg.sql), never a value.

-- ============================================================================= migrations (migrate.py)

-- name: migration_lock
-- Held to the end of the migrating transaction: concurrent migrators run one after another.
SELECT pg_advisory_xact_lock(%(lock_class)s, 0);

-- name: current_schema
SELECT current_schema();

-- name: search_path
SHOW search_path;

-- name: create_schema
CREATE SCHEMA IF NOT EXISTS {schema};

-- name: migrations_table
CREATE TABLE IF NOT EXISTS conveyor_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: applied_migrations
SELECT version FROM conveyor_migrations;

-- name: record_migration
INSERT INTO conveyor_migrations (version, name) VALUES (%(version)s, %(name)s);

-- ============================================================================= leadership (leadership.py)

-- name: still_connected
SELECT 1;

-- name: try_leadership
-- A session lock keyed by schema: deployments sharing a database elect separately.
SELECT pg_try_advisory_lock(%(lock_class)s, hashtext(current_schema()));

-- name: give_up_leadership
SELECT pg_advisory_unlock(%(lock_class)s, hashtext(current_schema()));

-- ============================================================================= wake-ups (listener.py)

-- name: listen
LISTEN {channel};

-- name: notify
SELECT pg_notify(c, '') FROM unnest(%(channels)s::text[]) AS c;

-- ============================================================================= vacuuming (vacuum.py)

-- name: dead_rows
-- The message partitions and the counter table of this schema past their dead-row thresholds.
SELECT relname, n_dead_tup FROM pg_stat_user_tables
WHERE schemaname = current_schema()
  AND ((relname LIKE 'messages\_%%' AND n_dead_tup >= %(messages)s)
       OR (relname = 'shard_stats' AND n_dead_tup >= %(counters)s))
ORDER BY n_dead_tup DESC;

-- name: vacuum
-- SKIP_LOCKED: a shard being dropped (its queue deleted) is skipped, not waited for.
VACUUM (SKIP_LOCKED) {table};
