"""Held lease requests: the long poll of Conveyor's engine ``lease`` route.

An idle remote worker asks for a lease with ``wait_ms``; when nothing is deliverable, the server
holds the request until messages may have arrived, and then leases again. A held request is an
asyncio future, not a thread: hundreds of idle workers cost hundreds of futures. One watcher thread
per queue that has held requests calls the engine's blocking ``wait`` (which returns on a send,
retry or release in this process, or on another process's commit) and wakes that queue's futures.
A worker that stops ends its own held requests at once (``wake``, by the waiter id it sent).

>>> holds = LeaseHolds(engine)
>>> stopped = await holds.hold(queue_id, 20.0, waiter="acc1/3f...")   # True: its client woke it
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass, field

from conveyor.engine.base import Engine

log = logging.getLogger("conveyor.server")

# How long a watcher's engine wait lasts before it looks again whether anyone still waits.
WATCH_SECONDS = 1.0
# A wake that comes before its held request reached the server is kept this long for it.
EARLY_WAKE_SECONDS = 5.0


@dataclass(eq=False)
class _Hold:
    future: asyncio.Future[bool]
    waiter: str | None


@dataclass
class LeaseHolds:
    """The held lease requests of one server (see the module docstring)."""

    engine: Engine
    _holds: dict[str, set[_Hold]] = field(default_factory=dict)
    _watchers: set[str] = field(default_factory=set)
    _early: dict[tuple[str, str], float] = field(default_factory=dict)
    _loop: asyncio.AbstractEventLoop | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    async def hold(self, queue_id: str, seconds: float, waiter: str | None = None) -> bool:
        """Wait up to ``seconds`` for messages on the queue; True if the waiter's client asked to stop."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        hold = _Hold(loop.create_future(), waiter)
        with self._lock:
            if waiter is not None and self._early.pop((queue_id, waiter), 0.0) > time.monotonic():
                return True
            self._holds.setdefault(queue_id, set()).add(hold)
            if queue_id not in self._watchers:
                self._watchers.add(queue_id)
                watcher = threading.Thread(target=self._watch, args=(queue_id, loop), name="conveyor-lease-watch")
                watcher.daemon = True
                watcher.start()
        try:
            done, _ = await asyncio.wait({hold.future}, timeout=seconds)
            return bool(done) and hold.future.result()
        finally:
            with self._lock:
                self._holds.get(queue_id, set()).discard(hold)
            hold.future.cancel()

    def wake_waiter(self, queue_id: str, waiter: str) -> None:
        """End the held requests of one client on the queue (called on the event loop)."""
        with self._lock:
            mine = [h for h in self._holds.get(queue_id, ()) if h.waiter == waiter]
            if not mine:
                now = time.monotonic()
                self._early = {k: t for k, t in self._early.items() if t > now}
                self._early[(queue_id, waiter)] = now + EARLY_WAKE_SECONDS
        for hold in mine:
            if not hold.future.done():
                hold.future.set_result(True)

    def release_all(self) -> None:
        """End every held request now (the server is shutting down); safe from any thread."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._fire_all)

    def _fire(self, queue_id: str, stop: bool = False) -> None:
        with self._lock:
            holds = list(self._holds.get(queue_id, ()))
        for hold in holds:
            if not hold.future.done():
                hold.future.set_result(stop)

    def _fire_all(self) -> None:
        with self._lock:
            queues = list(self._holds)
        for queue_id in queues:
            self._fire(queue_id, stop=True)

    def _watch(self, queue_id: str, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            with self._lock:
                if not self._holds.get(queue_id):
                    self._holds.pop(queue_id, None)
                    self._watchers.discard(queue_id)
                    return
            started = time.monotonic()
            try:
                self.engine.wait(queue_id, WATCH_SECONDS)
                # An early return is a wake-up; after a full wait, look whether a delay or a lease ran out.
                woke = time.monotonic() - started < WATCH_SECONDS or self._deliverable(queue_id)
            except Exception:  # the queue was deleted, or storage failed: the held leases will say so
                woke = True
                time.sleep(WATCH_SECONDS)
            if woke:
                try:
                    loop.call_soon_threadsafe(self._fire, queue_id)
                except RuntimeError:  # the event loop is gone: the server stopped
                    return

    def _deliverable(self, queue_id: str) -> bool:
        next_ms = self.engine.next_visible_ms(queue_id)
        return next_ms is not None and next_ms <= self.engine.clock.now_ms()
