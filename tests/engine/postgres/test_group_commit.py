"""Group commit on PostgreSQL: concurrent sends share transactions; a failing one fails alone."""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg
import pytest

import conveyor
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.postgres.database import pipelined_transaction
from conveyor.engine.postgres.engine import WRITE_LANES
from conveyor.model import DeliveryPolicy, NewMessage, QueueSettings


def test_concurrent_sends_share_commits_and_all_are_stored(pg_url: str) -> None:
    engine = PostgresEngine(pg_url)
    try:
        queue = engine.create_queue("q", QueueSettings()).queue_id
        barrier = threading.Barrier(16)

        def produce(n: int) -> None:
            barrier.wait()
            for i in range(25):
                engine.enqueue(queue, [NewMessage(f"{n}-{i}".encode(), "text", 0)])

        threads = [threading.Thread(target=produce, args=(n,)) for n in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert engine.metrics(queue).backlog_count == 400
        assert engine.counters(queue).sent == 400
        assert engine._writer.operations >= 400
        assert engine._writer.commits < engine._writer.operations
    finally:
        engine.close()


def test_a_send_to_a_deleted_queue_fails_alone(pg_url: str) -> None:
    engine, other = PostgresEngine(pg_url), PostgresEngine(pg_url)
    try:
        kept = engine.create_queue("kept", QueueSettings()).queue_id
        doomed = engine.create_queue("doomed", QueueSettings()).queue_id
        engine.enqueue(doomed, [NewMessage(b"x", "text", 0)])  # caches the shard map
        other.delete_queue(doomed)
        with pytest.raises(conveyor.QueueNotFound):
            engine.enqueue(doomed, [NewMessage(b"y", "text", 0)])
        engine.enqueue(kept, [NewMessage(b"z", "text", 0)])
        assert engine.metrics(kept).backlog_count == 1
    finally:
        engine.close()
        other.close()


def test_an_urgent_send_is_stored_while_every_write_lane_is_busy(pg_url: str) -> None:
    engine = PostgresEngine(pg_url)
    release = threading.Event()
    try:
        queue = engine.create_queue("q", QueueSettings()).queue_id
        woken = engine.create_queue("woken", QueueSettings()).queue_id
        held: list[threading.Thread] = []
        for _ in range(WRITE_LANES):  # each holds one lane's commit until released
            entered = threading.Event()

            def hold(conn: object, lane: int, entered: threading.Event = entered) -> Callable[[], None]:
                entered.set()
                release.wait(60)
                return lambda: None

            thread = threading.Thread(target=engine._writer.run, args=(hold,))
            thread.start()
            held.append(thread)
            assert entered.wait(30), "a write lane did not take the holding operation"
        blocked = threading.Thread(target=engine.enqueue, args=(queue, [NewMessage(b"behind", "text", 0)]))
        blocked.start()
        engine.enqueue(woken, [NewMessage(b"wake", "text", 0)], urgent=True)
        assert engine.metrics(woken).backlog_count == 1
        assert blocked.is_alive()  # the ordinary send still waits for a lane
        release.set()
        blocked.join(30)
        for thread in held:
            thread.join(30)
        assert engine.metrics(queue).backlog_count == 1
    finally:
        release.set()
        engine.close()


def test_an_owed_send_is_stored_and_delivered_like_any_other(pg_url: str) -> None:
    engine = PostgresEngine(pg_url)
    try:
        queue = engine.create_queue("woken", QueueSettings()).queue_id
        for _ in range(2):  # the urgent lane's first (it opens the connection) and a later one
            engine.enqueue(queue, [NewMessage(b"wake", "text", 0)], urgent=True, owed=True)
        assert engine.metrics(queue).backlog_count == 2
        assert [m.body for m in engine.lease(queue, 10, 30_000, DeliveryPolicy())] == [b"wake", b"wake"]
    finally:
        engine.close()


def test_a_pipelined_transaction_that_fails_stores_nothing_and_leaves_the_connection_usable(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TEMPORARY TABLE t (n int PRIMARY KEY)")
        with pytest.raises(psycopg.errors.UniqueViolation), pipelined_transaction(conn):
            conn.execute("INSERT INTO t VALUES (1)")
            conn.execute("INSERT INTO t VALUES (1)")  # refused when the pipeline syncs at the end
        with pytest.raises(RuntimeError), pipelined_transaction(conn):
            conn.execute("INSERT INTO t VALUES (2)")
            raise RuntimeError("the caller's own failure")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        with pipelined_transaction(conn, synchronous_commit=False) as pipeline:
            conn.execute("INSERT INTO t VALUES (3)")
            pipeline.sync()
            assert conn.execute("SELECT n FROM t").fetchall() == [(3,)]
        assert conn.execute("SELECT n FROM t").fetchall() == [(3,)]
