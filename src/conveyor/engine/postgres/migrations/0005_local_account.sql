-- Version 5: every queue belongs to an account. Queues made before accounts existed (embedded use,
-- the CLI) had plain names; they move into account `local`, where embedded use now works, so the
-- CLI, the Python API and `conveyor serve` all see them as account local's. A plain name whose
-- `local/` twin exists already (made through the server) moves into account `unqualified` instead:
-- nothing is renamed onto another queue, and nothing is lost.
UPDATE queues SET name = 'unqualified/' || name
WHERE strpos(name, '/') = 0 AND ('local/' || name) IN (SELECT name FROM queues);
UPDATE queues SET name = 'local/' || name WHERE strpos(name, '/') = 0;

-- A consumer's dead letter queue is a name in its queue's account.
UPDATE consumers c
SET dead_letter_queue = split_part(q.name, '/', 1) || '/' || c.dead_letter_queue
FROM queues q
WHERE q.queue_id = c.queue_id AND c.dead_letter_queue <> '' AND strpos(c.dead_letter_queue, '/') = 0;
