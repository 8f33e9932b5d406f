-- Version 18: the package CDN's publishing tables (conveyor.cdn; SQLite keeps them in cdn.db, at the
-- end of cdn/sqlite_schema.sql, where the search index is FTS5; both run cdn/queries.sql).

-- The search index of published packages, one row per package: the t_ columns hold its name,
-- description, keywords, filename and repository URL lower-cased with punctuation as spaces;
-- searched with to_tsvector('simple', ...) over the fields asked for.
CREATE TABLE cdn_search (
    account text NOT NULL,
    name text NOT NULL,
    t_name text NOT NULL,
    t_description text NOT NULL,
    t_keywords text NOT NULL,
    t_filename text NOT NULL,
    t_repository text NOT NULL,
    PRIMARY KEY (account, name)
);

-- The last audit's counts per bucket and outcome (ok, missing, size, sha512, repaired), for /metrics.
CREATE TABLE cdn_audit_counts (
    account text NOT NULL,
    bucket text NOT NULL,
    outcome text NOT NULL,
    count bigint NOT NULL,
    audited_ms bigint NOT NULL,
    PRIMARY KEY (account, bucket, outcome)
);
