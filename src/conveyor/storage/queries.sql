-- Named queries of the storage catalog, in SQL that SQLite and PostgreSQL both run; parameters are
-- written :name (the PostgreSQL catalog turns them into psycopg's placeholders).

-- name: insert_bucket
INSERT INTO storage_buckets (account, name, location, url, endpoint, region, access_key_id, secret_access_key, created_ms)
VALUES (:account, :name, :location, :url, :endpoint, :region, :access_key_id, :secret_access_key, :created_ms)
ON CONFLICT (account, name) DO NOTHING;

-- name: get_bucket
SELECT name, location, url, endpoint, region, access_key_id, secret_access_key, created_ms
FROM storage_buckets WHERE account = :account AND name = :name;

-- name: list_buckets
SELECT name, location, url, endpoint, region, access_key_id, secret_access_key, created_ms
FROM storage_buckets WHERE account = :account ORDER BY name;

-- name: any_object
SELECT key FROM storage_objects WHERE account = :account AND bucket = :bucket LIMIT 1;

-- name: delete_bucket
DELETE FROM storage_buckets WHERE account = :account AND name = :name;

-- name: delete_bucket_rules
DELETE FROM storage_notification_rules WHERE account = :account AND bucket = :bucket;

-- name: delete_bucket_lifecycle
DELETE FROM storage_lifecycle_rules WHERE account = :account AND bucket = :bucket;

-- name: get_object
SELECT key, size, etag, sha256, content_type, metadata, uploaded_ms
FROM storage_objects WHERE account = :account AND bucket = :bucket AND key = :key;

-- An object and where its bytes are: in ``data`` (a small object of a local bucket), else a file
-- or S3 (``data IS NULL``).
-- name: read_object
SELECT key, size, etag, sha256, content_type, metadata, uploaded_ms, data
FROM storage_objects WHERE account = :account AND bucket = :bucket AND key = :key;

-- name: object_in_file
SELECT data IS NULL FROM storage_objects WHERE account = :account AND bucket = :bucket AND key = :key;

-- name: insert_object
INSERT INTO storage_objects (account, bucket, key, size, etag, sha256, content_type, metadata, uploaded_ms, data)
VALUES (:account, :bucket, :key, :size, :etag, :sha256, :content_type, :metadata, :uploaded_ms, :data)
ON CONFLICT (account, bucket, key) DO NOTHING;

-- name: upsert_object
INSERT INTO storage_objects (account, bucket, key, size, etag, sha256, content_type, metadata, uploaded_ms, data)
VALUES (:account, :bucket, :key, :size, :etag, :sha256, :content_type, :metadata, :uploaded_ms, :data)
ON CONFLICT (account, bucket, key) DO UPDATE SET
    size = excluded.size, etag = excluded.etag, sha256 = excluded.sha256,
    content_type = excluded.content_type, metadata = excluded.metadata, uploaded_ms = excluded.uploaded_ms,
    data = excluded.data;

-- name: delete_object
DELETE FROM storage_objects WHERE account = :account AND bucket = :bucket AND key = :key;

-- name: list_objects
SELECT key, size, etag, sha256, content_type, metadata, uploaded_ms
FROM storage_objects
WHERE account = :account AND bucket = :bucket AND key > :after
  AND key >= :prefix AND (:upper = '' OR key < :upper)      -- the prefix's range of the primary key
  AND substr(key, 1, :prefix_length) = :prefix
ORDER BY key LIMIT :limit;

-- name: expired_objects
SELECT key, size, etag, sha256, content_type, metadata, uploaded_ms
FROM storage_objects
WHERE account = :account AND bucket = :bucket
  AND key >= :prefix AND (:upper = '' OR key < :upper)
  AND substr(key, 1, :prefix_length) = :prefix
  AND uploaded_ms <= :cutoff_ms
ORDER BY key LIMIT :limit;

-- name: insert_rule
INSERT INTO storage_notification_rules
    (rule_id, account, bucket, queue_id, queue_name, actions, prefix, suffix, description, created_ms)
VALUES (:rule_id, :account, :bucket, :queue_id, :queue_name, :actions, :prefix, :suffix, :description, :created_ms);

-- name: list_rules
SELECT rule_id, queue_id, queue_name, actions, prefix, suffix, description, created_ms
FROM storage_notification_rules WHERE account = :account AND bucket = :bucket ORDER BY created_ms, rule_id;

-- name: delete_rule
DELETE FROM storage_notification_rules WHERE account = :account AND bucket = :bucket AND rule_id = :rule_id;

-- name: insert_lifecycle_rule
INSERT INTO storage_lifecycle_rules (rule_id, account, bucket, prefix, max_age_seconds, created_ms)
VALUES (:rule_id, :account, :bucket, :prefix, :max_age_seconds, :created_ms);

-- name: list_lifecycle_rules
SELECT rule_id, prefix, max_age_seconds, created_ms
FROM storage_lifecycle_rules WHERE account = :account AND bucket = :bucket ORDER BY created_ms, rule_id;

-- name: all_lifecycle_rules
SELECT account, bucket, rule_id, prefix, max_age_seconds, created_ms
FROM storage_lifecycle_rules ORDER BY account, bucket, created_ms;

-- name: delete_lifecycle_rule
DELETE FROM storage_lifecycle_rules WHERE account = :account AND bucket = :bucket AND rule_id = :rule_id;

-- name: insert_event
INSERT INTO storage_outbox (event_id, account, queue_id, body, created_ms)
VALUES (:event_id, :account, :queue_id, :body, :created_ms);

-- name: pending_events
SELECT event_id, account, queue_id, body FROM storage_outbox
WHERE created_ms <= :before_ms ORDER BY created_ms, event_id LIMIT :limit;

-- name: delete_event
DELETE FROM storage_outbox WHERE event_id = :event_id;
