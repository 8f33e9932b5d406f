-- The embedded catalog's named queries (conveyor/engine/sqlite/catalog.py).

-- name: queue_ids
SELECT queue_id FROM queues ORDER BY name;

-- name: queue_ids_in_range
-- The queues whose names start with a prefix (base.prefix_range): a range the unique index on
-- name answers, so listing one account's queues reads only that account's.
SELECT queue_id FROM queues WHERE name >= :low AND name < :high ORDER BY name;
