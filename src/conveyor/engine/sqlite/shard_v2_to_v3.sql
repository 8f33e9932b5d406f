-- Shard files of version 2 counted every message in `stats` as it was stored. Version 3 lets a lone
-- send leave the row alone: messages past `counted_through` are counted on read and folded in later
-- (shard.sql). Every message of a version 2 file is counted already. Runs in the transaction that
-- opens the file, so a crash leaves the file as it was.
ALTER TABLE stats ADD COLUMN counted_through INTEGER NOT NULL DEFAULT 0;
UPDATE stats SET counted_through = (SELECT coalesce(max(seq), 0) FROM payloads);
PRAGMA user_version = 3;
