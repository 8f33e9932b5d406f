-- Version 6: an index on queue names compared byte-wise, so a prefix range (one account's queues,
-- `ACCOUNT/...`) is read from the index whatever the database's collation.
CREATE INDEX queues_name_bytewise ON queues (name COLLATE "C");
