-- Version 16: the package CDN's tables (conveyor.cdn; SQLite keeps the same tables in cdn.db,
-- cdn/sqlite_schema.sql; both run cdn/queries.sql).

-- The CDN of an account (conveyor cdn init).
CREATE TABLE cdn_settings (
    account text PRIMARY KEY,
    primary_bucket text NOT NULL,
    staging_bucket text NOT NULL,
    mirror_bucket text,
    registry text NOT NULL,
    cron text NOT NULL,
    public_account text NOT NULL,
    staging_days integer NOT NULL,
    created_ms bigint NOT NULL
);

-- A package config as given (JSON), checked when added.
CREATE TABLE cdn_packages (
    account text NOT NULL,
    name text NOT NULL,
    config text NOT NULL,
    added_ms bigint NOT NULL,
    PRIMARY KEY (account, name)
);

-- A version the update check found: state queued -> downloaded -> processed, or failed (error says why).
-- files: the selected files as JSON [{"path", "dest", "size", "sri"}]; published_ms stays NULL
-- until the publishing slice writes it, so nothing here is visible to readers yet.
CREATE TABLE cdn_versions (
    account text NOT NULL,
    name text NOT NULL,
    version text NOT NULL,
    state text NOT NULL,
    tarball text NOT NULL,
    integrity text,
    error text,
    files text,
    skipped text,
    queued_ms bigint NOT NULL,
    updated_ms bigint NOT NULL,
    published_ms bigint,
    PRIMARY KEY (account, name, version)
);

-- A selected file of a version as ProcessingWorkflow left it: its size, SHA-512 and (for .js and
-- .css, as cdnjs) its SRI. One row per file, so the children of a version never write one row.
CREATE TABLE cdn_files (
    account text NOT NULL,
    name text NOT NULL,
    version text NOT NULL,
    dest text COLLATE "C" NOT NULL,
    size bigint NOT NULL,
    sha512 text NOT NULL,
    sri text,
    processed_ms bigint NOT NULL,
    PRIMARY KEY (account, name, version, dest)
);
