-- The package CDN's tables in a SQLite deployment's cdn.db (version 3; sqlite_v1_to_v2.sql and
-- sqlite_v2_to_v3.sql bring older files here). PostgreSQL has the same tables in migrations
-- 0016_cdn.sql, 0017 and 0018; both run the named queries of queries.sql.
PRAGMA application_id = 1131376246;  -- 'Conv': marks the file as Conveyor's
PRAGMA user_version = 3;

-- The CDN of an account (conveyor cdn init).
CREATE TABLE cdn_settings (
    account TEXT PRIMARY KEY,
    primary_bucket TEXT NOT NULL,
    staging_bucket TEXT NOT NULL,
    mirror_bucket TEXT,
    registry TEXT NOT NULL,
    cron TEXT NOT NULL,
    public_account TEXT NOT NULL,
    staging_days INTEGER NOT NULL,
    created_ms BIGINT NOT NULL
);

-- A package config as given (JSON), checked when added.
CREATE TABLE cdn_packages (
    account TEXT NOT NULL,
    name TEXT NOT NULL,
    config TEXT NOT NULL,
    added_ms BIGINT NOT NULL,
    PRIMARY KEY (account, name)
);

-- A version the update check found: state queued -> downloaded -> processed, or failed (error says why).
-- files: the selected files as JSON [{"path", "dest", "size", "sri"}]; published_ms stays NULL
-- until the publishing slice writes it, so nothing here is visible to readers yet.
CREATE TABLE cdn_versions (
    account TEXT NOT NULL,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    state TEXT NOT NULL,
    tarball TEXT NOT NULL,
    integrity TEXT,
    error TEXT,
    files TEXT,
    skipped TEXT,
    queued_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    published_ms BIGINT,
    PRIMARY KEY (account, name, version)
);

-- An output file of a version as ProcessingWorkflow left it (a selected original, or the minified
-- twin it made): its size, SHA-512 and (for .js and .css, as cdnjs) its SRI. One row per file, so
-- the children of a version never write one row. A twin names its original (source) and the
-- minifier that made it (tool, tool_version); an original has NULL there, but an image optimised in
-- place names its optimiser in tool and tool_version.
CREATE TABLE cdn_files (
    account TEXT NOT NULL,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    dest TEXT NOT NULL,
    size BIGINT NOT NULL,
    sha512 TEXT NOT NULL,
    sri TEXT,
    processed_ms BIGINT NOT NULL,
    source TEXT,
    tool TEXT,
    tool_version TEXT,
    PRIMARY KEY (account, name, version, dest)
);

-- Publishing (PublishingWorkflow, import, audit).
-- The search index of published packages (FTS5), one row per package: the t_ columns hold its
-- name, description, keywords, filename and repository URL lower-cased with punctuation as spaces.
CREATE VIRTUAL TABLE cdn_search USING fts5(
    account UNINDEXED,
    name UNINDEXED,
    t_name,
    t_description,
    t_keywords,
    t_filename,
    t_repository
);

-- The last audit's counts per bucket and outcome (ok, missing, size, sha512, repaired), for /metrics.
CREATE TABLE cdn_audit_counts (
    account TEXT NOT NULL,
    bucket TEXT NOT NULL,
    outcome TEXT NOT NULL,
    count BIGINT NOT NULL,
    audited_ms BIGINT NOT NULL,
    PRIMARY KEY (account, bucket, outcome)
);
