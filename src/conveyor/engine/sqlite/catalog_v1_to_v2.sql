-- Version 2: every queue belongs to an account. Queues made before accounts existed (embedded use,
-- the CLI) had plain names; they move into account `local`, where embedded use now works, so the
-- CLI, the Python API and `conveyor serve` all see them as account local's. A plain name whose
-- `local/` twin exists already (made through the server before this upgrade) moves into account
-- `unqualified` instead: nothing is renamed onto another queue, and nothing is lost.
UPDATE queues SET name = 'unqualified/' || name
WHERE instr(name, '/') = 0 AND ('local/' || name) IN (SELECT name FROM queues);
UPDATE queues SET name = 'local/' || name WHERE instr(name, '/') = 0;

-- A consumer's dead letter queue is a name in its queue's account.
UPDATE consumers
SET dead_letter_queue =
    (SELECT substr(q.name, 1, instr(q.name, '/')) FROM queues q WHERE q.queue_id = consumers.queue_id)
    || dead_letter_queue
WHERE dead_letter_queue <> '' AND instr(dead_letter_queue, '/') = 0;

-- The published catalog snapshot holds the old names: a new generation makes it stale, so opening
-- the directory publishes it again.
INSERT INTO sequences (name, value) VALUES ('catalog_generation', 1)
ON CONFLICT (name) DO UPDATE SET value = value + 1;

PRAGMA user_version = 2;
