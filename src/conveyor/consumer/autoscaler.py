"""How many batches of one consumer run at once.

Conveyor scales to the backlog at once: while messages are deliverable and fewer than ``allowed``
batches run, the dispatcher starts another batch — it never waits for a batch to finish before
growing. ``allowed`` starts at the cap (``max_concurrency``, or 250 when automatic). A handler that
raises halves ``allowed`` (down to 1); a batch that succeeds doubles it back toward the cap. Explicit
``retry()`` calls are the handler's decision, not failures, so they change nothing.
"""

from __future__ import annotations

import logging
import threading

from conveyor import limits

log = logging.getLogger("conveyor.autoscaler")


class Autoscaler:
    """Concurrency of one consumer: ``running`` now, ``allowed`` at most."""

    def __init__(self, queue: str, max_concurrency: int | None) -> None:
        self.queue = queue
        self.cap = max_concurrency or limits.MAX_CONCURRENCY
        self.allowed = self.cap
        self.running = 0
        self.peak = 0
        self._lock = threading.Lock()

    def has_room(self) -> bool:
        return self.running < self.allowed

    def started(self) -> None:
        with self._lock:
            self.running += 1
            if self.running > self.peak:
                self.peak = self.running
                log.info("queue %s: consumer concurrency %d", self.queue, self.running)

    def finished(self, failed: bool) -> None:
        with self._lock:
            self.running -= 1
            before = self.allowed
            self.allowed = max(1, self.allowed // 2) if failed else min(self.cap, self.allowed * 2)
            if self.allowed != before:
                log.info(
                    "queue %s: handlers %s; concurrency allowed %d -> %d",
                    self.queue,
                    "failing" if failed else "recovered",
                    before,
                    self.allowed,
                )
