-- cdn.db version 2 -> 3: publishing's search index and the audit's counts (as at the end of sqlite_schema.sql).
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

