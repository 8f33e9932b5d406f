-- Version 9: KV namespaces (conveyor.storage.kv). Keys compare byte-wise (COLLATE "C"), so a list
-- is in UTF-8 byte order and a prefix is an index range, whatever the database's collation.
CREATE TABLE kv_namespaces (
    id text PRIMARY KEY,
    account text NOT NULL,
    title text NOT NULL,
    created_ms bigint NOT NULL,
    UNIQUE (account, title)
);
CREATE TABLE kv_entries (
    namespace_id text NOT NULL REFERENCES kv_namespaces (id),
    key text COLLATE "C" NOT NULL,
    value bytea NOT NULL,
    kind text NOT NULL,
    metadata text,
    expiration bigint,
    PRIMARY KEY (namespace_id, key)
);
CREATE INDEX kv_entries_expiration ON kv_entries (expiration) WHERE expiration IS NOT NULL;
