-- Version 23: the oldest message planned for the queue's own partitions only.
--
-- Version 2's conveyor_oldest_ms is a SQL function with sub-selects, which PostgreSQL does not
-- inline: its body was planned with `shards` as an unknown parameter, so every call planned the
-- seeks over every partition of `messages`, one per shard of every queue of the deployment (200-300
-- ms a call at 1,000 queues, paid by each send and each metrics read). Now each shard's two seeks
-- are planned with the shard's key as a value (EXECUTE ... USING), so the planner keeps that one
-- partition and its index: well under a millisecond at any number of queues. (One statement with
-- `shard_key = ANY (shards)` would plan once, but cannot walk the (shard_key, seq) index in seq
-- order: it sorts the partitions instead.) The answer is version 2's: the first row by seq of all
-- the shards (seqs come from one sequence) against the oldest moved-in one; NULL when both are empty.
CREATE OR REPLACE FUNCTION conveyor_oldest_ms(shards bigint[]) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    shard bigint;
    seq bigint;
    ts bigint;
    first_seq bigint;
    first_ms bigint;
    moved_ms bigint;
BEGIN
    FOREACH shard IN ARRAY coalesce(shards, '{}') LOOP
        EXECUTE 'SELECT m.seq, m.timestamp_ms FROM messages m WHERE m.shard_key = $1 ORDER BY m.seq LIMIT 1'
            INTO seq, ts USING shard;
        IF seq IS NOT NULL AND (first_seq IS NULL OR seq < first_seq) THEN
            first_seq := seq;
            first_ms := ts;
        END IF;
        EXECUTE 'SELECT min(m.timestamp_ms) FROM messages m WHERE m.shard_key = $1 AND m.moved'
            INTO ts USING shard;
        moved_ms := least(moved_ms, ts);
    END LOOP;
    RETURN least(first_ms, moved_ms);
END
$$;
