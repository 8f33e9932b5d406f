-- name: find_namespace
SELECT id, title FROM kv_namespaces WHERE account = %(account)s AND title = %(title)s;

-- name: get_namespace
SELECT id, title FROM kv_namespaces WHERE account = %(account)s AND id = %(id)s;

-- name: list_namespaces
SELECT id, title FROM kv_namespaces WHERE account = %(account)s ORDER BY title;

-- name: insert_namespace
INSERT INTO kv_namespaces (id, account, title, created_ms) VALUES (%(id)s, %(account)s, %(title)s, %(now_ms)s);

-- name: rename_namespace
UPDATE kv_namespaces SET title = %(title)s WHERE account = %(account)s AND id = %(id)s;

-- name: delete_entries_of_namespace
DELETE FROM kv_entries WHERE namespace_id = %(id)s;

-- name: delete_namespace
DELETE FROM kv_namespaces WHERE account = %(account)s AND id = %(id)s;

-- name: put_entry
INSERT INTO kv_entries (namespace_id, key, value, kind, metadata, expiration)
VALUES (%(id)s, %(key)s, %(value)s, %(kind)s, %(metadata)s, %(expiration)s)
ON CONFLICT (namespace_id, key) DO UPDATE SET
    value = excluded.value, kind = excluded.kind, metadata = excluded.metadata, expiration = excluded.expiration;

-- name: get_entry
-- One lookup for a hit: the namespace's account is checked in the same query.
SELECT e.value, e.kind, e.metadata, e.expiration
FROM kv_namespaces n JOIN kv_entries e ON e.namespace_id = n.id AND e.key = %(key)s
WHERE n.id = %(id)s AND n.account = %(account)s AND (e.expiration IS NULL OR e.expiration > %(now_s)s);

-- name: delete_entry
DELETE FROM kv_entries WHERE namespace_id = %(id)s AND key = %(key)s;

-- name: list_keys
SELECT key, expiration, metadata FROM kv_entries
WHERE namespace_id = %(id)s AND key >= %(start)s AND key > %(after)s AND (expiration IS NULL OR expiration > %(now_s)s)
ORDER BY key LIMIT %(limit)s;

-- name: list_keys_until
SELECT key, expiration, metadata FROM kv_entries
WHERE namespace_id = %(id)s AND key >= %(start)s AND key > %(after)s AND key < %(end)s
    AND (expiration IS NULL OR expiration > %(now_s)s)
ORDER BY key LIMIT %(limit)s;

-- name: purge_expired
DELETE FROM kv_entries WHERE (namespace_id, key) IN (
    SELECT namespace_id, key FROM kv_entries WHERE expiration IS NOT NULL AND expiration <= %(now_s)s LIMIT %(limit)s
) RETURNING 1;
