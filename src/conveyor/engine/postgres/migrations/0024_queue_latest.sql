-- Version 24: queue_latest, each queue's newest history point and the one before it (p_ columns,
-- NULL when it has one point), kept by the coordinator's recorder in the transaction that records the
-- points (conveyor.engine.history) and pruned with them. The dashboard's overview ranks every queue
-- of an account by one range read of it instead of a seek a queue into queue_history. Filled here
-- from the points already recorded.
CREATE TABLE queue_latest (
    queue_id        text NOT NULL,
    queue_name      text COLLATE "C" NOT NULL,
    at_ms           bigint NOT NULL,
    backlog         bigint NOT NULL,
    backlog_bytes   bigint NOT NULL,
    oldest_ms       bigint NOT NULL,
    in_flight       bigint NOT NULL,
    sent            bigint NOT NULL,
    acked           bigint NOT NULL,
    retried         bigint NOT NULL,
    dead_lettered   bigint NOT NULL,
    concurrency     integer NOT NULL,
    p_queue_id      text,
    p_at_ms         bigint,
    p_backlog       bigint,
    p_backlog_bytes bigint,
    p_oldest_ms     bigint,
    p_in_flight     bigint,
    p_sent          bigint,
    p_acked         bigint,
    p_retried       bigint,
    p_dead_lettered bigint,
    p_concurrency   integer,
    PRIMARY KEY (queue_name)
);

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
