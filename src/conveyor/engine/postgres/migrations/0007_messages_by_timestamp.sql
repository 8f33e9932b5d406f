-- Version 7: retention expiry (`expire` in queries.sql) deletes a shard's messages sent before a
-- cutoff. Without an index on the send time it read the whole partition on every round; through
-- this one it reads what expires. (seq order is no substitute: moved messages keep older send
-- times, and engines on different hosts read different clocks.) Made on every partition, and on
-- those created later.
CREATE INDEX messages_timestamp ON messages (shard_key, timestamp_ms);
