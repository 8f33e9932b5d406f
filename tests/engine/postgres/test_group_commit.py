"""Group commit on PostgreSQL: concurrent sends share transactions; a failing one fails alone."""

from __future__ import annotations

import threading

import pytest

import conveyor
from conveyor.engine.postgres import PostgresEngine
from conveyor.model import NewMessage, QueueSettings


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
