"""LISTEN/NOTIFY: an idle consumer wakes when another process sends, without polling."""

from __future__ import annotations

import threading

from conveyor.engine.postgres import PostgresEngine
from conveyor.model import NewMessage, QueueSettings


def test_wait_returns_when_another_engine_sends(pg_url: str) -> None:
    consumer, producer = PostgresEngine(pg_url), PostgresEngine(pg_url)
    try:
        queue = producer.create_queue("q", QueueSettings()).queue_id
        consumer.wait(queue, 10)  # the first wait only sets up LISTEN
        woke = threading.Event()

        def idle() -> None:
            consumer.wait(queue, 120)
            woke.set()

        waiter = threading.Thread(target=idle)
        waiter.start()
        producer.enqueue(queue, [NewMessage(b"x", "text", 0)])
        waiter.join(60)
        assert woke.is_set(), "the consumer slept through a send"
    finally:
        consumer.close()
        producer.close()


def test_a_send_between_two_waits_is_not_missed(pg_url: str) -> None:
    engine = PostgresEngine(pg_url)
    try:
        queue = engine.create_queue("q", QueueSettings()).queue_id
        engine.wait(queue, 10)
        engine.enqueue(queue, [NewMessage(b"x", "text", 0)])
        done = threading.Event()
        waiter = threading.Thread(target=lambda: (engine.wait(queue, 120), done.set()))
        waiter.start()
        waiter.join(60)
        assert done.is_set()
    finally:
        engine.close()
