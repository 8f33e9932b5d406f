-- The package CDN's named queries, run on SQLite (cdn.db) and PostgreSQL (migrations 0016, 0017) alike.

-- name: insert_settings
INSERT INTO cdn_settings (account, primary_bucket, staging_bucket, mirror_bucket, registry, cron,
                          public_account, staging_days, created_ms)
VALUES (:account, :primary_bucket, :staging_bucket, :mirror_bucket, :registry, :cron,
        :public_account, :staging_days, :created_ms);

-- name: settings
SELECT account, primary_bucket, staging_bucket, mirror_bucket, registry, cron, public_account,
       staging_days, created_ms
FROM cdn_settings WHERE account = :account;

-- name: upsert_package
INSERT INTO cdn_packages (account, name, config, added_ms) VALUES (:account, :name, :config, :now)
ON CONFLICT (account, name) DO UPDATE SET config = excluded.config;

-- name: package
SELECT name, config FROM cdn_packages WHERE account = :account AND name = :name;

-- name: packages
SELECT name, config FROM cdn_packages WHERE account = :account ORDER BY name;

-- name: version_names
SELECT version FROM cdn_versions WHERE account = :account AND name = :name;

-- name: insert_version
INSERT INTO cdn_versions (account, name, version, state, tarball, integrity, queued_ms, updated_ms)
VALUES (:account, :name, :version, 'queued', :tarball, :integrity, :now, :now)
ON CONFLICT (account, name, version) DO NOTHING;

-- name: version
SELECT name, version, state, tarball, integrity, error, files, skipped, queued_ms, updated_ms, published_ms
FROM cdn_versions WHERE account = :account AND name = :name AND version = :version;

-- name: versions
SELECT name, version, state, tarball, integrity, error, files, skipped, queued_ms, updated_ms, published_ms
FROM cdn_versions WHERE account = :account AND name = :name ORDER BY queued_ms, version;

-- name: record_files
UPDATE cdn_versions SET state = 'downloaded', files = :files, skipped = :skipped, error = NULL,
                        updated_ms = :now
WHERE account = :account AND name = :name AND version = :version AND state IN ('queued', 'downloaded');

-- name: record_failure
UPDATE cdn_versions SET state = 'failed', error = :error, updated_ms = :now
WHERE account = :account AND name = :name AND version = :version AND published_ms IS NULL;

-- name: state_counts
SELECT state, COUNT(*) FROM cdn_versions WHERE account = :account GROUP BY state ORDER BY state;

-- name: package_count
SELECT COUNT(*) FROM cdn_packages WHERE account = :account;

-- name: insert_file
INSERT INTO cdn_files (account, name, version, dest, size, sha512, sri, processed_ms, source, tool, tool_version)
VALUES (:account, :name, :version, :dest, :size, :sha512, :sri, :now, :source, :tool, :tool_version)
ON CONFLICT (account, name, version, dest) DO NOTHING;

-- name: files
SELECT dest, size, sha512, sri, source, tool, tool_version FROM cdn_files
WHERE account = :account AND name = :name AND version = :version ORDER BY dest;

-- name: mark_processed
UPDATE cdn_versions SET state = 'processed', updated_ms = :now
WHERE account = :account AND name = :name AND version = :version AND state = 'downloaded';

-- Publishing (PublishingWorkflow, import, audit).

-- name: mark_published
UPDATE cdn_versions SET state = 'published', published_ms = COALESCE(published_ms, :now), error = NULL,
                        updated_ms = :now
WHERE account = :account AND name = :name AND version = :version AND state IN ('processed', 'published');

-- name: delete_search_entry
DELETE FROM cdn_search WHERE account = :account AND name = :name;

-- name: insert_search_entry
INSERT INTO cdn_search (account, name, t_name, t_description, t_keywords, t_filename, t_repository)
VALUES (:account, :name, :t_name, :t_description, :t_keywords, :t_filename, :t_repository);

-- name: search_sqlite
SELECT name FROM cdn_search WHERE account = :account AND cdn_search MATCH :query ORDER BY name;

-- name: search_postgres
SELECT name FROM cdn_search
WHERE account = :account
  AND to_tsvector('simple', concat_ws(' ',
        CASE WHEN CAST(:f_name AS boolean) THEN t_name END,
        CASE WHEN CAST(:f_description AS boolean) THEN t_description END,
        CASE WHEN CAST(:f_keywords AS boolean) THEN t_keywords END,
        CASE WHEN CAST(:f_filename AS boolean) THEN t_filename END,
        CASE WHEN CAST(:f_repository AS boolean) THEN t_repository END)) @@ to_tsquery('simple', :query)
ORDER BY name;

-- name: delete_audit_counts
DELETE FROM cdn_audit_counts WHERE account = :account;

-- name: insert_audit_count
INSERT INTO cdn_audit_counts (account, bucket, outcome, count, audited_ms)
VALUES (:account, :bucket, :outcome, :count, :now);

-- name: audit_counts
SELECT bucket, outcome, count, audited_ms FROM cdn_audit_counts WHERE account = :account ORDER BY bucket, outcome;
