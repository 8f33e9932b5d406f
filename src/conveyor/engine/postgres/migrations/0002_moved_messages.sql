-- Version 2: the oldest message, counting dead-lettered and redriven ones.
--
-- Sent messages arrive in timestamp order, so a shard's first row by seq is the oldest of them. Messages
-- moved in by a dead-letter move or a redrive keep their send timestamps but arrive last: mark them,
-- and index only them, so that finding the oldest stays two index probes per shard and ordinary
-- sends and leases pay nothing for it.
ALTER TABLE messages ADD COLUMN moved boolean NOT NULL DEFAULT false;
CREATE INDEX messages_moved ON messages (shard_key, timestamp_ms) WHERE moved;

-- The send timestamp of the oldest message stored in any of `shards`; NULL when they are empty.
CREATE FUNCTION conveyor_oldest_ms(shards bigint[]) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT least(
        (SELECT first.timestamp_ms
         FROM unnest(shards) AS k (shard_key),
              LATERAL (SELECT m.seq, m.timestamp_ms FROM messages m WHERE m.shard_key = k.shard_key
                       ORDER BY m.seq LIMIT 1) AS first
         ORDER BY first.seq LIMIT 1),
        (SELECT min(mv.timestamp_ms)
         FROM unnest(shards) AS k (shard_key),
              LATERAL (SELECT m.timestamp_ms FROM messages m WHERE m.shard_key = k.shard_key AND m.moved
                       ORDER BY m.timestamp_ms LIMIT 1) AS mv)
    )
$$;
