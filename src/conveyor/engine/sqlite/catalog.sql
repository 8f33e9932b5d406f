-- The catalog: queues, consumers and the shard map. Small and transactional, apart from messages.
PRAGMA application_id = 1131376246;  -- 'Conv': marks the file as Conveyor's
PRAGMA user_version = 2;

CREATE TABLE IF NOT EXISTS queues (
    queue_id        TEXT PRIMARY KEY,
    name            TEXT NOT NULL UNIQUE,
    created_on      TEXT NOT NULL,
    modified_on     TEXT NOT NULL,
    delivery_delay  INTEGER NOT NULL,
    delivery_paused INTEGER NOT NULL,
    retention       INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS consumers (
    consumer_id       TEXT PRIMARY KEY,
    queue_id          TEXT NOT NULL UNIQUE REFERENCES queues (queue_id) ON DELETE CASCADE,
    type              TEXT NOT NULL,
    script_name       TEXT NOT NULL,
    created_on        TEXT NOT NULL,
    dead_letter_queue TEXT NOT NULL,
    settings          TEXT NOT NULL
);

-- The shard map: every shard file of every queue. `state` is 'active' (takes writes) or 'draining'
-- (consumers still read it; producers no longer write to it).
CREATE TABLE IF NOT EXISTS shards (
    queue_id   TEXT NOT NULL REFERENCES queues (queue_id) ON DELETE CASCADE,
    shard_no   INTEGER NOT NULL,
    state      TEXT NOT NULL DEFAULT 'active',
    created_ms INTEGER NOT NULL,
    -- 1 once the shard's file exists: a file missing after that was deleted, not yet made.
    materialized INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue_id, shard_no)
);

-- Small counters: `producer_seq` hands each producing process its home shard; `catalog_generation`
-- grows with every change to queues and shards (in the same transaction), so the published catalog
-- snapshot (snapshot/catalog_*) can be told stale. Files made before it start it on the first change.
CREATE TABLE IF NOT EXISTS sequences (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT OR IGNORE INTO sequences (name, value) VALUES ('producer_seq', 0);
