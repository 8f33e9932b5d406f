-- Version 1: the catalog, the shard map with its striped counters, and the partitioned message table.

CREATE TABLE queues (
    queue_id        text PRIMARY KEY,
    name            text NOT NULL UNIQUE,
    created_on      text NOT NULL,
    modified_on     text NOT NULL,
    delivery_delay  integer NOT NULL,
    delivery_paused boolean NOT NULL,
    retention       integer NOT NULL
);

CREATE TABLE consumers (
    consumer_id       text PRIMARY KEY,
    queue_id          text NOT NULL UNIQUE REFERENCES queues (queue_id) ON DELETE CASCADE,
    type              text NOT NULL,
    script_name       text NOT NULL,
    created_on        text NOT NULL,
    dead_letter_queue text NOT NULL,
    settings          text NOT NULL
);

-- The shard map. `shard_key` names the shard's partition of `messages` (messages_<shard_key>);
-- `state` is 'active' (takes writes) or 'draining' (consumers still read it).
CREATE TABLE shards (
    shard_key  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue_id   text NOT NULL REFERENCES queues (queue_id) ON DELETE CASCADE,
    shard_no   integer NOT NULL,
    state      text NOT NULL DEFAULT 'active',
    created_ms bigint NOT NULL,
    UNIQUE (queue_id, shard_no)
);

-- Running totals of each shard, striped over `slot`s: each engine writes its own slot, so writers
-- in different processes never queue behind one counter row's lock. Readers sum the slots.
-- fillfactor leaves room on the page so counter updates are HOT (no index churn, pruned in place).
CREATE TABLE shard_stats (
    shard_key     bigint NOT NULL REFERENCES shards (shard_key) ON DELETE CASCADE,
    slot          smallint NOT NULL,
    backlog_count bigint NOT NULL DEFAULT 0,
    backlog_bytes bigint NOT NULL DEFAULT 0,
    sent          bigint NOT NULL DEFAULT 0,
    acked         bigint NOT NULL DEFAULT 0,
    retried       bigint NOT NULL DEFAULT 0,
    dead_lettered bigint NOT NULL DEFAULT 0,
    expired       bigint NOT NULL DEFAULT 0,
    dropped       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (shard_key, slot)
) WITH (fillfactor = 30, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);

-- `producer_slot` hands each producing engine its home shard; `message_seq` orders messages.
CREATE SEQUENCE producer_slot;
CREATE SEQUENCE message_seq;

-- Every message of every queue; one partition per storage shard, created with the shard.
-- `visible_at_ms` is when the message can next be delivered: the send time plus its delay, the end
-- of its current lease, or the end of its retry delay. `lease` is the token of the latest delivery
-- (NULL before the first and after a retry); `attempts` counts deliveries started.
CREATE TABLE messages (
    shard_key     bigint NOT NULL,
    seq           bigint NOT NULL DEFAULT nextval('message_seq'),
    id            text NOT NULL,
    timestamp_ms  bigint NOT NULL,
    visible_at_ms bigint NOT NULL,
    attempts      integer NOT NULL DEFAULT 0,
    lease         bigint,
    content_type  text NOT NULL,
    body          bytea NOT NULL,
    PRIMARY KEY (shard_key, seq)
) PARTITION BY LIST (shard_key);
CREATE INDEX messages_visible ON messages (shard_key, visible_at_ms);
