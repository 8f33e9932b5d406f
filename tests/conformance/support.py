"""Helpers of the conformance suite: a hand-driven clock, backlog checks, push-consumer runs.

Everything here goes through the public API (``conveyor.Conveyor``, ``Queue``, ``App``) or the
engine interface (``conveyor.engine.base.Engine``), so the same tests hold for every engine.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import conveyor
from tests.waiting import wait_for


class FakeClock:
    """A clock that moves only when a test says so (the engines read time only from ``clock``)."""

    def __init__(self, start_ms: int | None = None) -> None:
        self.ms = start_ms if start_ms is not None else time.time_ns() // 1_000_000
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self.ms

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.ms += round(seconds * 1000)


def backlog(q: conveyor.Queue) -> tuple[int, int]:
    m = q.metrics()
    return m.backlog_count, m.backlog_bytes


def bodies(q: conveyor.Queue, limit: int = 100) -> list[Any]:
    """The bodies stored in ``q`` (peeked, so nothing is leased)."""
    return [m.body for m in q.peek(batch_size=limit)]


def refused(
    q: conveyor.Queue,
    error: type[conveyor.ConveyorError],
    code: int,
    action: Callable[..., object],
    *args: Any,
    **kwargs: Any,
) -> str:
    """Call ``action(*args, **kwargs)``: it must raise exactly ``error`` with Cloudflare ``code`` and
    leave ``q``'s stored messages as they were. Returns the error text (``"... (code N)"``)."""
    before = backlog(q), bodies(q)
    with pytest.raises(error) as caught:
        action(*args, **kwargs)
    assert type(caught.value) is error
    assert caught.value.code == code
    text = str(caught.value)
    assert text.endswith(f"(code {code})")
    assert (backlog(q), bodies(q)) == before
    return text


Handler = Callable[[conveyor.MessageBatch], Any]


def consume(
    client: conveyor.Conveyor, queue: str, handler: Handler, *, timeout: float = 20.0, **settings: Any
) -> conveyor.App:
    """Run ``handler`` as the push consumer of ``queue`` until the queue is drained."""
    app = conveyor.App(client)
    settings.setdefault("max_batch_timeout", 0)
    app.consumer(queue, **settings)(handler)
    assert app.drain(timeout), f"queue {queue!r} was not drained within {timeout} s"
    return app


def run_until(
    client: conveyor.Conveyor, queue: str, handler: Handler, done: Callable[[], bool], **settings: Any
) -> None:
    """Run ``handler`` as the push consumer of ``queue`` until ``done()`` (for runs that leave
    delayed messages behind, which ``drain`` would wait for)."""
    app = conveyor.App(client)
    settings.setdefault("max_batch_timeout", 0)
    app.consumer(queue, **settings)(handler)
    app.start()
    try:
        wait_for(done)
    finally:
        app.stop(grace=5)


def release_schedule(q: conveyor.Queue, clock: FakeClock, delays: list[int]) -> dict[Any, int]:
    """When each stored message of ``q`` becomes deliverable: ``{body: delay}``, checked just
    before and at each of ``delays`` (seconds from now), by pulling with a long lease.

    The queue must have an ``http_pull`` consumer; the clock is moved forward.
    """
    start = clock.now_ms()
    seen: dict[Any, int] = {}
    for delay in sorted(set(delays)):
        clock.ms = start + delay * 1000 - 1
        early = q.pull(batch_size=100, visibility_timeout_ms=43_200_000)
        assert not early, f"{[m.body for m in early]} delivered before {delay} s"
        clock.ms = start + delay * 1000
        for m in q.pull(batch_size=100, visibility_timeout_ms=43_200_000):
            seen[m.body] = delay
    return seen


def shard_of_messages(client: conveyor.Conveyor, q: conveyor.Queue, data_dir: Path) -> dict[str, int]:
    """Which shard holds each message of ``q``, by message id. Where messages live is the engine's
    business, so this looks into each engine's storage: SQLite shard files (also behind the ``http``
    engine, whose server keeps its files in ``data_dir``), PostgreSQL shard partitions."""
    from conveyor.engine.postgres import PostgresEngine

    engine = client.engine
    if isinstance(engine, PostgresEngine):
        import psycopg

        with psycopg.connect(engine.url) as db:
            rows = db.execute(
                "SELECT m.id, s.shard_no FROM messages m JOIN shards s USING (shard_key) WHERE s.queue_id = %s",
                (q.id,),
            ).fetchall()
        return {mid: n for mid, n in rows}
    out: dict[str, int] = {}
    for n in range(q.info().shards):
        shard = sqlite3.connect(data_dir / "shards" / f"{q.id}.{n}.db")
        try:
            out.update((mid, n) for (mid,) in shard.execute("SELECT id FROM payloads"))
        finally:
            shard.close()
    return out


class Deliveries:
    """What push handlers saw: the attempts of each body, and the size of each batch."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.attempts: dict[Any, list[int]] = {}
        self.batch_sizes: list[int] = []
        self.messages: list[conveyor.Message] = []

    def record(self, batch: conveyor.MessageBatch) -> None:
        with self._lock:
            self.batch_sizes.append(len(batch.messages))
            for m in batch.messages:
                self.attempts.setdefault(m.body, []).append(m.attempts)
                self.messages.append(m)

    def redelivered(self) -> set[Any]:
        with self._lock:
            return {body for body, seen in self.attempts.items() if len(seen) > 1}
