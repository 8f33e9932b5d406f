-- The embedded catalog's named queries (conveyor/engine/sqlite/catalog.py; the tables: catalog.sql).

-- ============================================================================= queues

-- name: queue_by_id
-- A queue's row and its shard count; its consumers come from `consumers_of`.
SELECT queue_id, name, created_on, modified_on, delivery_delay, delivery_paused, retention,
       (SELECT count(*) FROM shards s WHERE s.queue_id = queues.queue_id)
FROM queues WHERE queue_id = :key;

-- name: queue_by_name
SELECT queue_id, name, created_on, modified_on, delivery_delay, delivery_paused, retention,
       (SELECT count(*) FROM shards s WHERE s.queue_id = queues.queue_id)
FROM queues WHERE name = :key;

-- name: name_taken
SELECT 1 FROM queues WHERE name = :name;

-- name: queues_listed
-- Every queue's row and shard count, by name: a listing is this and `consumers_listed`, two
-- statements however many queues there are (not two a queue).
SELECT queue_id, name, created_on, modified_on, delivery_delay, delivery_paused, retention,
       (SELECT count(*) FROM shards s WHERE s.queue_id = queues.queue_id)
FROM queues ORDER BY name;

-- name: queues_listed_in_range
-- The queues whose names start with a prefix (base.prefix_range): a range the unique index on
-- name answers, so listing one account's queues reads only that account's.
SELECT queue_id, name, created_on, modified_on, delivery_delay, delivery_paused, retention,
       (SELECT count(*) FROM shards s WHERE s.queue_id = queues.queue_id)
FROM queues WHERE name >= :low AND name < :high ORDER BY name;

-- name: consumers_listed
-- The consumers of the queues `queues_listed` reads (the columns of `consumers_of`).
SELECT c.consumer_id, c.queue_id, q.name, c.type, c.script_name, c.created_on, c.dead_letter_queue, c.settings
FROM consumers c JOIN queues q USING (queue_id);

-- name: consumers_listed_in_range
SELECT c.consumer_id, c.queue_id, q.name, c.type, c.script_name, c.created_on, c.dead_letter_queue, c.settings
FROM consumers c JOIN queues q USING (queue_id) WHERE q.name >= :low AND q.name < :high;

-- name: names
SELECT name FROM queues ORDER BY name;

-- name: names_in_range
SELECT name FROM queues WHERE name >= :low AND name < :high ORDER BY name;

-- name: queues_named
-- The queues of a JSON array of names (a seek of the name index each), by name.
SELECT queue_id, name, created_on, modified_on, delivery_delay, delivery_paused, retention,
       (SELECT count(*) FROM shards s WHERE s.queue_id = queues.queue_id)
FROM queues WHERE name IN (SELECT value FROM json_each(:names)) ORDER BY name;

-- name: consumers_named
SELECT c.consumer_id, c.queue_id, q.name, c.type, c.script_name, c.created_on, c.dead_letter_queue, c.settings
FROM consumers c JOIN queues q USING (queue_id) WHERE q.name IN (SELECT value FROM json_each(:names));

-- name: dead_letter_sources
-- The queues whose consumer dead-letters into a queue (a scan of the consumers: one a queue at most).
SELECT q.name FROM consumers c JOIN queues q USING (queue_id) WHERE c.dead_letter_queue = :dlq ORDER BY q.name;

-- name: insert_queue
INSERT INTO queues (queue_id, name, created_on, modified_on, delivery_delay, delivery_paused, retention)
VALUES (:queue, :name, :now, :now, :delay, :paused, :retention);

-- name: update_queue
UPDATE queues SET delivery_delay = :delay, delivery_paused = :paused, retention = :retention, modified_on = :now
WHERE queue_id = :queue;

-- name: delete_queue
-- Its consumers and shard rows go with it (ON DELETE CASCADE).
DELETE FROM queues WHERE queue_id = :queue;

-- ============================================================================= the shard map

-- name: insert_shard
-- `materialized`: 1 when the shard's file was made before this commit.
INSERT INTO shards (queue_id, shard_no, created_ms, materialized) VALUES (:queue, :number, :now, :made);

-- name: shards_of
SELECT shard_no, state FROM shards WHERE queue_id = :queue ORDER BY shard_no;

-- name: top_shard
SELECT max(shard_no) FROM shards WHERE queue_id = :queue;

-- name: materialized
SELECT materialized FROM shards WHERE queue_id = :queue AND shard_no = :number;

-- name: mark_materialized
UPDATE shards SET materialized = 1 WHERE queue_id = :queue AND shard_no = :number;

-- name: all_shards
SELECT queue_id, shard_no, state FROM shards ORDER BY queue_id, shard_no;

-- name: all_queue_settings
SELECT queue_id, name, delivery_delay, delivery_paused, retention FROM queues;

-- name: shards_by_queue_name
-- The whole shard map as `conveyor doctor` reports it: queue id, name, shard number, materialized.
SELECT q.queue_id, q.name, s.shard_no, s.materialized FROM queues q
JOIN shards s USING (queue_id) ORDER BY q.name, s.shard_no;

-- ============================================================================= sequences

-- name: bump_generation
-- In the transaction of every change to queues and shards (catalog.sql says why).
INSERT INTO sequences (name, value) VALUES ('catalog_generation', 1)
ON CONFLICT (name) DO UPDATE SET value = value + 1;

-- name: generation
SELECT coalesce((SELECT value FROM sequences WHERE name = 'catalog_generation'), 0);

-- name: next_producer_slot
UPDATE sequences SET value = value + 1 WHERE name = 'producer_seq' RETURNING value;

-- name: data_version
-- Changes whenever another connection commits to the file.
PRAGMA data_version;

-- ============================================================================= consumers

-- name: consumers_of
-- The columns catalog_rows.consumer_from_row reads, as for `consumer`.
SELECT c.consumer_id, c.queue_id, q.name, c.type, c.script_name, c.created_on, c.dead_letter_queue, c.settings
FROM consumers c JOIN queues q USING (queue_id) WHERE c.queue_id = :queue;

-- name: consumer
SELECT c.consumer_id, c.queue_id, q.name, c.type, c.script_name, c.created_on, c.dead_letter_queue, c.settings
FROM consumers c JOIN queues q USING (queue_id) WHERE c.consumer_id = :consumer;

-- name: insert_consumer
INSERT INTO consumers (consumer_id, queue_id, type, script_name, created_on, dead_letter_queue, settings)
VALUES (:consumer, :queue, :type, :script, :now, :dlq, :settings);

-- name: update_consumer
UPDATE consumers SET settings = :settings, dead_letter_queue = :dlq WHERE consumer_id = :consumer;

-- name: delete_consumer
DELETE FROM consumers WHERE consumer_id = :consumer;
