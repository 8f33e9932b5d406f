"""The coordinator: one per deployment, running the maintenance services.

Leadership is the engine's to grant (embedded: an exclusive lock on the directory's
``coordinator.lock``; PostgreSQL: an advisory lock). Every worker process runs a Coordinator; the one
holding leadership does the work, the others retry now and then and take over when the leader dies
(the operating system releases a dead process's lock).

Services, each on its own interval:

- **retention**: delete messages older than their queue's ``message_retention_period`` (counted in
  the queue's ``expired`` counter).
- **shard split**: sample each queue's ``sent`` counter; when a queue's write rate per active shard
  stayed above ``limits.SHARD_SPLIT_RATE`` (5,000 msg/s) over one ``SHARD_SAMPLE_SECONDS`` window,
  add a shard (up to ``limits.MAX_SHARDS``). Producer processes spread over the shards by their home
  slot, so a split pays off when several processes produce.
- **queue history**: every ``history_interval`` seconds (10), one point per queue (backlog, oldest
  message, in flight, lifetime counters, the workers' concurrency), kept ``history_keep`` seconds
  (24 h) in the engine (:mod:`conveyor.engine.history`); the dashboard and ``conveyor queues info
  --history`` read it.
- **catalog snapshot** (engines that publish one, as the SQLite engine does): republish it when it is
  behind the catalog, say because a process died between a catalog commit and its publish.

Services walk every queue; one whose storage fails is skipped and the rest go on (``QueueFaults``),
and failures are logged when they begin and when they end, not on every round.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from conveyor import limits
from conveyor.engine.base import Engine
from conveyor.engine.history import MIN_INTERVAL_SECONDS, HistoryRecorder, HistorySettings
from conveyor.engine.queue_faults import QueueFaults
from conveyor.engine.reconnecting_loop import Backoff, ReconnectingLoop
from conveyor.errors import ConveyorError
from conveyor.model import QueueInfo

log = logging.getLogger("conveyor.coordinator")

RETENTION_INTERVAL = 30.0
SNAPSHOT_CHECK_INTERVAL = 3.0
LEADERSHIP_RETRY = 5.0


@runtime_checkable
class PublishesCatalogSnapshot(Protocol):
    """An engine that shares a catalog snapshot between processes (the SQLite engine)."""

    def refresh_catalog_snapshot(self) -> bool: ...


class ShardSplitter:
    """Adds a shard to queues whose write rate per shard is high."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._last: dict[str, tuple[float, int]] = {}
        self.faults = QueueFaults("shard split", log)

    def __call__(self) -> None:
        for queue in self.engine.list_queues():
            with self.faults.isolated(queue):
                self._sample(queue)

    def _sample(self, queue: QueueInfo) -> None:
        now = time.monotonic()
        sent = self.engine.sent_count(queue.queue_id)
        before = self._last.get(queue.queue_id)
        self._last[queue.queue_id] = (now, sent)
        if before is None or now <= before[0]:
            return
        rate = (sent - before[1]) / (now - before[0])
        if rate / max(1, queue.shards) > limits.SHARD_SPLIT_RATE and queue.shards < limits.MAX_SHARDS:
            count = self.engine.add_shard(queue.queue_id)
            log.info("queue %s writes %.0f msg/s: added a shard (now %d)", queue.queue_name, rate, count)


class Coordinator:
    """``history``: how often the queue history is recorded and how long it is kept."""

    def __init__(self, engine: Engine, *, history: HistorySettings | None = None) -> None:
        history = history or HistorySettings()
        if history.interval < MIN_INTERVAL_SECONDS:
            raise ValueError(f"history interval must be at least {MIN_INTERVAL_SECONDS} s, not {history.interval}")
        self.engine = engine
        self.history = HistoryRecorder(engine, history.keep)
        self.services: list[tuple[str, float, Callable[[], object]]] = [
            ("retention", RETENTION_INTERVAL, engine.expire),
            ("shard-split", limits.SHARD_SAMPLE_SECONDS, ShardSplitter(engine)),
            ("queue-history", history.interval, self.history),
        ]
        if isinstance(engine, PublishesCatalogSnapshot):
            self.services.append(("catalog-snapshot", SNAPSHOT_CHECK_INTERVAL, engine.refresh_catalog_snapshot))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.leader = False
        # Services whose last run failed, with the error: reported when they fail and when they work
        # again, not every round.
        self._failing: dict[str, str] = {}
        self._due: dict[str, float] = {}  # monotonic time of each service's next run

    def add_service(self, name: str, interval: float, service: Callable[[], object]) -> None:
        """Run ``service`` every ``interval`` seconds while this process leads, like the built-in
        ones: the parts beside the queues (workflow timers and retention, bucket outboxes and
        lifecycle) add theirs before :meth:`start`; a failing service does not stop the others."""
        if any(existing == name for existing, _, _ in self.services):
            raise ValueError(f"coordinator service {name!r} is already added")
        self.services.append((name, interval, service))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="conveyor-coordinator", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.history.close()
        if self.leader:
            self.engine.release_leadership()
            self.leader = False

    def _run(self, name: str, service: Callable[[], object]) -> None:
        try:
            service()
        except Exception as exc:
            # Deliberately broad: the isolation boundary between services, so one failing service
            # does not stop the others; the error is logged with its traceback when it changes.
            error = f"{type(exc).__name__}: {exc}"
            if self._failing.get(name) != error:
                self._failing[name] = error
                log.exception("coordinator service %s failed (reported again only if the error changes)", name)
        else:
            if self._failing.pop(name, None) is not None:
                log.warning("coordinator service %s works again", name)

    def _loop(self) -> None:
        self._due = {name: 0.0 for name, _, _ in self.services}
        # Contesting leadership can fail (the lock file cannot be opened, the database is away):
        # tried again as if it had been refused.
        ReconnectingLoop(
            "contesting coordinator leadership",
            self._round,
            stop=self._stop,
            transient=(OSError, ConveyorError),
            log=log,
            backoff=Backoff(LEADERSHIP_RETRY, LEADERSHIP_RETRY),
        ).run()

    def _round(self) -> float:
        """Run the services that are due if this process leads; the seconds until the next round."""
        # Asked every round, not only until granted: leadership can be lost (PostgreSQL's lock
        # goes with its connection, e.g. when the server restarts) and another process may
        # hold it by now.
        was_leader, self.leader = self.leader, self.engine.acquire_leadership()
        if self.leader and not was_leader:
            log.info("this process is the coordinator")
        elif was_leader and not self.leader:
            log.warning("this process lost coordinator leadership")
        if not self.leader:
            return LEADERSHIP_RETRY
        now = time.monotonic()
        for name, interval, service in self.services:
            if now >= self._due[name]:
                self._due[name] = now + interval
                self._run(name, service)
        return max(0.05, min(self._due.values()) - time.monotonic())
