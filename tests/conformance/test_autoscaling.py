"""Immediate autoscaling (DESIGN.md improvement 3): a consumer runs as many batches at once as the
backlog needs, up to ``max_concurrency``, and backs off while handlers raise.

The handlers here wait for each other (up to a few seconds) instead of sleeping, so the observed
peak concurrency is the outcome, not a wall-clock figure.
"""

from __future__ import annotations

import threading

import conveyor
from tests.conformance.support import backlog, consume


class Concurrency:
    """Counts handlers running at once. Each handler, on entering, waits (at most ``patience``
    seconds) until ``target`` handlers have run together, so the peak shows how many batches the
    dispatcher started at once however slow the machine is."""

    def __init__(self, target: int, patience: float = 5.0) -> None:
        self.target = target
        self.patience = patience
        self.running = 0
        self.peak = 0
        self._cond = threading.Condition()

    def run(self) -> None:
        with self._cond:
            self.running += 1
            self.peak = max(self.peak, self.running)
            self._cond.notify_all()
            self._cond.wait_for(lambda: self.peak >= self.target, self.patience)
            self.running -= 1


def test_automatic_concurrency_runs_the_whole_backlog_at_once(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue
) -> None:
    queue.send_batch([{"body": i} for i in range(9)])
    seen = Concurrency(target=9)

    def handler(batch: conveyor.MessageBatch) -> None:
        seen.run()

    app = consume(conveyor_client, "q", handler, max_batch_size=1)
    assert seen.peak == 9
    assert app.concurrency("q") == 0
    assert backlog(queue) == (0, 0)


def test_max_concurrency_caps_the_batches_running_at_once(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue
) -> None:
    queue.send_batch([{"body": i} for i in range(9)])
    # Every handler waits a moment for a 4th peer, which the cap must never let in.
    seen = Concurrency(target=4, patience=0.3)

    def handler(batch: conveyor.MessageBatch) -> None:
        seen.run()

    consume(conveyor_client, "q", handler, max_batch_size=1, max_concurrency=3)
    assert seen.peak == 3
    assert backlog(queue) == (0, 0)


def test_failing_handlers_reduce_concurrency(conveyor_client: conveyor.Conveyor, queue: conveyor.Queue) -> None:
    queue.send_batch([{"body": i} for i in range(8)])
    first = Concurrency(target=8)
    retries = Concurrency(target=8, patience=0.3)  # never reached: failures cut the concurrency

    def handler(batch: conveyor.MessageBatch) -> None:
        attempt = batch.messages[0].attempts
        wave = first if attempt == 1 else retries
        wave.run()
        if attempt == 1:
            raise RuntimeError("every first delivery fails")

    consume(conveyor_client, "q", handler, max_batch_size=1, max_concurrency=8, timeout=30)
    assert first.peak == 8
    assert retries.peak < 8
    assert backlog(queue) == (0, 0)


def test_explicit_retries_do_not_reduce_concurrency(conveyor_client: conveyor.Conveyor, queue: conveyor.Queue) -> None:
    queue.send_batch([{"body": i} for i in range(4)])
    first = Concurrency(target=4)
    second = Concurrency(target=4)

    def handler(batch: conveyor.MessageBatch) -> None:
        attempt = batch.messages[0].attempts
        wave = first if attempt == 1 else second
        wave.run()
        if attempt == 1:
            batch.retry_all()

    consume(conveyor_client, "q", handler, max_batch_size=1, max_concurrency=4)
    assert (first.peak, second.peak) == (4, 4)
