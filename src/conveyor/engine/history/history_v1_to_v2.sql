-- history.db version 1 -> 2: queue_latest (as at the end of history_sqlite.sql), filled from the
-- points already recorded: each queue's newest point and the one before it.
CREATE TABLE queue_latest (
    queue_id        TEXT NOT NULL,
    queue_name      TEXT NOT NULL,
    at_ms           INTEGER NOT NULL,
    backlog         INTEGER NOT NULL,
    backlog_bytes   INTEGER NOT NULL,
    oldest_ms       INTEGER NOT NULL,
    in_flight       INTEGER NOT NULL,
    sent            INTEGER NOT NULL,
    acked           INTEGER NOT NULL,
    retried         INTEGER NOT NULL,
    dead_lettered   INTEGER NOT NULL,
    concurrency     INTEGER NOT NULL,
    p_queue_id      TEXT,
    p_at_ms         INTEGER,
    p_backlog       INTEGER,
    p_backlog_bytes INTEGER,
    p_oldest_ms     INTEGER,
    p_in_flight     INTEGER,
    p_sent          INTEGER,
    p_acked         INTEGER,
    p_retried       INTEGER,
    p_dead_lettered INTEGER,
    p_concurrency   INTEGER,
    PRIMARY KEY (queue_name)
) WITHOUT ROWID;

INSERT INTO queue_latest (queue_id, queue_name, at_ms, backlog, backlog_bytes, oldest_ms, in_flight, sent, acked, retried, dead_lettered, concurrency,
    p_queue_id, p_at_ms, p_backlog, p_backlog_bytes, p_oldest_ms, p_in_flight, p_sent, p_acked, p_retried, p_dead_lettered, p_concurrency)
SELECT queue_id, queue_name, at_ms, backlog, backlog_bytes, oldest_ms, in_flight, sent, acked, retried, dead_lettered, concurrency,
       p_queue_id, p_at_ms, p_backlog, p_backlog_bytes, p_oldest_ms, p_in_flight, p_sent, p_acked, p_retried, p_dead_lettered, p_concurrency
FROM (
    SELECT queue_id, queue_name, at_ms, backlog, backlog_bytes, oldest_ms, in_flight, sent, acked, retried, dead_lettered, concurrency,
           ROW_NUMBER() OVER newest_first AS n,
           LEAD(queue_id) OVER newest_first AS p_queue_id,
       LEAD(at_ms) OVER newest_first AS p_at_ms,
       LEAD(backlog) OVER newest_first AS p_backlog,
       LEAD(backlog_bytes) OVER newest_first AS p_backlog_bytes,
       LEAD(oldest_ms) OVER newest_first AS p_oldest_ms,
       LEAD(in_flight) OVER newest_first AS p_in_flight,
       LEAD(sent) OVER newest_first AS p_sent,
       LEAD(acked) OVER newest_first AS p_acked,
       LEAD(retried) OVER newest_first AS p_retried,
       LEAD(dead_lettered) OVER newest_first AS p_dead_lettered,
       LEAD(concurrency) OVER newest_first AS p_concurrency
    FROM queue_history
    WINDOW newest_first AS (PARTITION BY queue_name ORDER BY at_ms DESC)
) AS ranked
WHERE n = 1;

PRAGMA user_version = 2;
