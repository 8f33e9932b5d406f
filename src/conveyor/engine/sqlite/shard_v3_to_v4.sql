-- Version 4 leaves fresh messages (stored deliverable at once, never delivered) out of the
-- `messages_visible` index, found by seq from `stats.fresh_from` instead (shard.sql): a lone send
-- writes two pages instead of three. Every message of a version 3 file stays indexed (fresh = 0), so
-- nothing needs to be found by seq yet. Runs in the transaction that opens the file, so a crash leaves
-- the file as it was.
ALTER TABLE messages ADD COLUMN fresh INTEGER NOT NULL DEFAULT 0;
DROP INDEX messages_visible;
CREATE INDEX messages_visible ON messages (visible_at_ms) WHERE fresh = 0;
ALTER TABLE stats ADD COLUMN fresh_from INTEGER NOT NULL DEFAULT 0;
PRAGMA user_version = 4;
