-- name: schema
PRAGMA application_id = 1131376246;
PRAGMA user_version = 1;
CREATE TABLE kv_namespaces (
    id TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    title TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    UNIQUE (account, title)
);
CREATE TABLE kv_entries (
    namespace_id TEXT NOT NULL REFERENCES kv_namespaces (id),
    key TEXT NOT NULL,
    value BLOB NOT NULL,
    kind TEXT NOT NULL,
    metadata TEXT,
    expiration INTEGER,
    PRIMARY KEY (namespace_id, key)
) WITHOUT ROWID;
CREATE INDEX kv_entries_expiration ON kv_entries (expiration) WHERE expiration IS NOT NULL;

-- name: find_namespace
SELECT id, title FROM kv_namespaces WHERE account = :account AND title = :title;

-- name: get_namespace
SELECT id, title FROM kv_namespaces WHERE account = :account AND id = :id;

-- name: list_namespaces
SELECT id, title FROM kv_namespaces WHERE account = :account ORDER BY title;

-- name: insert_namespace
INSERT INTO kv_namespaces (id, account, title, created_ms) VALUES (:id, :account, :title, :now_ms);

-- name: rename_namespace
UPDATE kv_namespaces SET title = :title WHERE account = :account AND id = :id;

-- name: delete_entries_of_namespace
DELETE FROM kv_entries WHERE namespace_id = :id;

-- name: delete_namespace
DELETE FROM kv_namespaces WHERE account = :account AND id = :id;

-- name: put_entry
INSERT INTO kv_entries (namespace_id, key, value, kind, metadata, expiration)
VALUES (:id, :key, :value, :kind, :metadata, :expiration)
ON CONFLICT (namespace_id, key) DO UPDATE SET
    value = excluded.value, kind = excluded.kind, metadata = excluded.metadata, expiration = excluded.expiration;

-- name: get_entry
-- One lookup for a hit: the namespace's account is checked in the same query.
SELECT e.value, e.kind, e.metadata, e.expiration
FROM kv_namespaces n JOIN kv_entries e ON e.namespace_id = n.id AND e.key = :key
WHERE n.id = :id AND n.account = :account AND (e.expiration IS NULL OR e.expiration > :now_s);

-- name: delete_entry
DELETE FROM kv_entries WHERE namespace_id = :id AND key = :key;

-- name: list_keys
SELECT key, expiration, metadata FROM kv_entries
WHERE namespace_id = :id AND key >= :start AND key > :after AND (expiration IS NULL OR expiration > :now_s)
ORDER BY key LIMIT :limit;

-- name: list_keys_until
SELECT key, expiration, metadata FROM kv_entries
WHERE namespace_id = :id AND key >= :start AND key > :after AND key < :end
    AND (expiration IS NULL OR expiration > :now_s)
ORDER BY key LIMIT :limit;

-- name: purge_expired
DELETE FROM kv_entries WHERE (namespace_id, key) IN (
    SELECT namespace_id, key FROM kv_entries WHERE expiration IS NOT NULL AND expiration <= :now_s LIMIT :limit
) RETURNING 1;
