-- Version 3: retention expiry reads the expiring messages through an index on their send time,
-- instead of every payload of the shard (shard.sql says why seq order would not do). Runs in the
-- transaction that opens the file, so a crash leaves the file as it was.
CREATE INDEX payloads_timestamp ON payloads (timestamp_ms);
PRAGMA user_version = 3;
