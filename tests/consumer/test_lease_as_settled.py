"""A batch that ends while its dispatcher waits for room takes the next one as it settles
(``Engine.settle_and_lease``): on SQLite, one commit instead of a settle and the dispatcher's lease."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

import conveyor
from conveyor.engine.sharded import ShardedEngine
from tests.waiting import wait_for

QUEUE = "one-at-a-time"


def lease_thread_alive() -> bool:
    return any(t.name == f"conveyor-lease-{QUEUE}" for t in threading.enumerate())


def test_a_consumer_of_one_batch_at_a_time_leases_as_it_settles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dispatcher_leases: list[int] = []
    leased_as_settled: list[int] = []
    lease, settle_and_lease = ShardedEngine.lease, ShardedEngine.settle_and_lease

    def counted_lease(self: ShardedEngine[Any], queue_id: str, n: int, *args: Any) -> Any:
        got = lease(self, queue_id, n, *args)
        if threading.current_thread().name == f"conveyor-lease-{QUEUE}":
            dispatcher_leases.append(len(got))
        return got

    def counted_settle_and_lease(self: ShardedEngine[Any], *args: Any, **kwargs: Any) -> Any:
        result, got = settle_and_lease(self, *args, **kwargs)
        leased_as_settled.append(len(got))
        return result, got

    monkeypatch.setattr(ShardedEngine, "lease", counted_lease)
    monkeypatch.setattr(ShardedEngine, "settle_and_lease", counted_settle_and_lease)
    seen: list[str] = []
    with conveyor.connect(f"sqlite://{tmp_path / 'data'}") as cv:
        q = cv.create_queue(QUEUE)
        q.send_batch([{"body": f"m{n:02}"} for n in range(40)])
        app = conveyor.App(cv)

        @app.consumer(QUEUE, max_batch_size=1, max_concurrency=1)
        def handle(batch: conveyor.MessageBatch) -> None:
            seen.extend(m.body for m in batch.messages)

        app.start()
        try:
            wait_for(lambda: len(seen) == 40, what="40 messages")
        finally:
            app.stop(grace=5)
        assert q.metrics().backlog_count == 0
    assert seen == [f"m{n:02}" for n in range(40)]
    # Each leased once: the first by the dispatcher, nearly all the others with the settle before
    # them (a batch that ended before the dispatcher waited for room left it the next lease).
    assert sum(dispatcher_leases) + sum(leased_as_settled) == 40
    assert sum(dispatcher_leases) <= 5


def test_what_a_settle_leases_while_the_consumer_stops_goes_back_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stopped: list[threading.Thread] = []
    settle_and_lease = ShardedEngine.settle_and_lease

    def stop_meanwhile(self: ShardedEngine[Any], *args: Any, **kwargs: Any) -> Any:
        result, got = settle_and_lease(self, *args, **kwargs)
        if got and not stopped:  # the consumer is told to stop while this settle commits
            stopper = threading.Thread(target=app.stop, kwargs={"grace": 5})
            stopper.start()
            stopped.append(stopper)
            wait_for(lambda: not lease_thread_alive(), what="the dispatcher's lease thread to end")
        return result, got

    monkeypatch.setattr(ShardedEngine, "settle_and_lease", stop_meanwhile)
    seen: list[str] = []
    with conveyor.connect(f"sqlite://{tmp_path / 'data'}") as cv:
        q = cv.create_queue(QUEUE)
        q.send_batch([{"body": "first"}, {"body": "second"}])
        app = conveyor.App(cv)

        @app.consumer(QUEUE, max_batch_size=1, max_concurrency=1, visibility_timeout_ms=600_000)
        def handle(batch: conveyor.MessageBatch) -> None:
            seen.extend(m.body for m in batch.messages)
            time.sleep(0.3)  # the dispatcher waits for room meanwhile

        app.start()
        try:
            wait_for(lambda: bool(stopped), what="a settle that leased the next batch")
            stopped[0].join(10)
        finally:
            app.stop(grace=5)
        assert seen == ["first"]
        # Given back, not held for the 10-minute lease, and its delivery not counted.
        assert q.counters().in_flight == 0
        [back] = q.peek()
        assert (back.body, back.attempts) == ("second", 0)
