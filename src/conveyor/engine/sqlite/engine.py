"""The embedded engine: a directory with ``catalog.db`` and one ``shards/QUEUE_ID.N.db`` per shard.

The policy both engines share (home shards, leases across shards, dead letters, expiry, redrive) is
``sharded.py``'s; this class supplies it the primitives of one shard file (``shard.py``). A queue's
settings and shard map come from the catalog snapshot, a read of shared memory
(``snapshot_store.py``, ``router.py``).

Wake-ups: a send wakes consumers in the same process at once (a condition variable). Consumers in
other processes notice a commit through SQLite's ``PRAGMA data_version``, read from shared memory
every few milliseconds while they wait — a read of the WAL index, not of the disk.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import logging
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

from conveyor.codec import split_stored_type, stored_type
from conveyor.deployment import Deployment
from conveyor.engine.base import Clock, SystemClock
from conveyor.engine.sharded import LeaseGroup, ShardedEngine, ShardMap, ShardSettlement
from conveyor.engine.sqlite.catalog import Catalog
from conveyor.engine.sqlite.damaged import DAMAGED_DIR, SHARD_FILE_SUFFIXES, keep_aside
from conveyor.engine.sqlite.reserve import SpaceReserve, reserve_size
from conveyor.engine.sqlite.router import ShardRouter
from conveyor.engine.sqlite.shard import InsertRow, LeasedRow, Row, Shard
from conveyor.engine.sqlite.snapshot_store import SnapshotStore
from conveyor.engine.sqlite.storage import ensure_directory
from conveyor.engine.sqlite.worker_registry import WorkerRegistry
from conveyor.errors import CorruptStorage, QueueNotFound, StorageError, StorageFull
from conveyor.ids import new_id, new_ids
from conveyor.model import (
    Counters,
    Metrics,
    NewMessage,
    QueueInfo,
    QueueSettings,
    SendBatchResult,
    StoredMessage,
    visible_at_ms,
)

log = logging.getLogger("conveyor.engine")

# How often a waiting consumer looks for commits made by other processes.
CROSS_PROCESS_POLL_SECONDS = 0.004


@dataclasses.dataclass(frozen=True, slots=True)
class _SendPlan:
    """What a send to a queue needs from the catalog, as of one snapshot generation: the shard this
    engine writes to, the queue's delivery delay, and whether that shard is the queue's only one
    (its counts are then the queue's). One read of the snapshot per send instead of three."""

    generation: int
    shard: Shard
    delay: int
    single: bool


def _copy(rows: list[Row], target: Shard, now_ms: int) -> None:
    """Store messages of another queue in ``target`` as moved in: ids and send times kept, visible now."""
    if rows:
        inserts: list[InsertRow] = [(mid, ts, ctype, body) for _, mid, ts, ctype, body in rows]
        target.insert(inserts, now_ms, sum(len(r[3]) for r in inserts), sent=False)


class SQLiteEngine(ShardedEngine[Shard]):
    """Queues in a directory of SQLite files.

    >>> engine = SQLiteEngine("/var/lib/conveyor")
    >>> engine.create_queue("emails", QueueSettings()).queue_name
    'emails'
    """

    def __init__(self, directory: str | os.PathLike[str], clock: Clock | None = None) -> None:
        self.directory = Path(directory)
        self.reserve = SpaceReserve(self.directory / "reserve", reserve_size())  # a bad size: nothing made
        ensure_directory(self.directory)
        ensure_directory(self.directory / "shards")
        self.catalog: Catalog = Catalog(self.directory / "catalog.db")
        self.reserve.restore()
        self._registry = WorkerRegistry(self.directory / "catalog.db")
        super().__init__(clock or SystemClock(), self.catalog, self._registry)
        self._wake: dict[str, threading.Condition] = defaultdict(threading.Condition)
        # Wake-ups are counted, so one that comes while no one waits is kept for the next wait.
        self._woken: dict[str, int] = defaultdict(int)
        self._seen_woken: dict[str, int] = defaultdict(int)
        # Threads in wait(), by queue: a send with no one to wake only counts the wake-up.
        self._waiting: dict[str, int] = defaultdict(int)
        self._leader_file: BinaryIO | None = None
        self.snapshots = SnapshotStore(self.directory / "snapshot" / "catalog", self.catalog)
        self.snapshots.refresh()  # a process may have died between a catalog commit and its publish
        self.router = ShardRouter(self.directory, self.catalog, self.snapshots)
        self._plans: dict[str, _SendPlan] = {}
        # The plan this thread's last home_shard() answered from, for the store() that follows it.
        self._plan_used = threading.local()

    def _catalog_written(self) -> None:
        """After this engine's own commit to queues or shards: publish it to every process on the host."""
        self.snapshots.publish()
        self.router.forget()
        self._plans.clear()

    def refresh_catalog_snapshot(self) -> bool:
        """Republish the catalog snapshot if it is missing, damaged or behind the catalog (the
        coordinator calls this every few seconds); True if it did."""
        return self.snapshots.refresh()

    # -- catalog ------------------------------------------------------------------------------
    def create_queue(self, name: str, settings: QueueSettings, shards: int = 1) -> QueueInfo:
        """The shard files are made first and the catalog rows committed after, so a queue either
        exists with all its files or not at all (a full disk refuses it whole); a crash in between
        leaves files no queue owns, which ``conveyor doctor`` reports."""
        queue_id = new_id()
        paths = [self.router.path(queue_id, number) for number in range(shards)]
        try:
            for path in paths:
                Shard(path, 0).close()
            info = self.catalog.create_queue(name, settings, shards, self.clock.now_ms(), queue_id)
        except BaseException as exc:
            for path in paths:
                for suffix in SHARD_FILE_SUFFIXES:
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
            if isinstance(exc, StorageError):
                raise type(exc)(f"queue {name!r} was not created: {exc.message}") from None
            raise
        self._catalog_written()
        return info

    def queue_settings(self, queue_id: str) -> QueueSettings:
        snapshot = self.snapshots.current()
        entry = snapshot.queues.get(queue_id) if snapshot is not None else None
        if entry is not None:
            return entry.settings
        settings = self.catalog.get_queue_by_id(queue_id).settings
        if snapshot is not None:  # it lacks a queue the catalog has: it is behind
            self.snapshots.publish()
        return settings

    def list_queues(self, prefix: str = "") -> list[QueueInfo]:
        return [
            dataclasses.replace(q, storage_error=self.storage_error(q.queue_id))
            for q in self.catalog.list_queues(prefix)
        ]

    def queue_names(self, prefix: str = "") -> list[str]:
        return self.catalog.queue_names(prefix)

    def queues_named(self, names: Sequence[str]) -> list[QueueInfo]:
        return self.catalog.queues_named(names)

    def dead_letter_sources(self, queue_name: str) -> list[str]:
        return self.catalog.dead_letter_sources(queue_name)

    def storage_error(self, queue_id: str) -> str | None:
        """Why the queue's shards cannot be read (file paths relative to the deployment), or None:
        each shard is opened (once per process) and its counters read."""
        try:
            for shard in self.router.all(queue_id):
                shard.stats()
        except QueueNotFound:
            return None
        except StorageError as exc:
            return exc.message.replace(f"{self.directory}{os.sep}", "")
        return None

    def update_queue(self, queue_id: str, settings: QueueSettings) -> QueueInfo:
        info = self.catalog.update_queue(queue_id, settings)
        self._catalog_written()
        self.wake(queue_id)
        return info

    def delete_queue(self, queue_id: str, *, force: bool = False) -> list[str]:
        return self.reserve.freeing(lambda: self._delete_queue(queue_id, force))

    def _delete_queue(self, queue_id: str, force: bool) -> list[str]:
        queue = self.catalog.get_queue_by_id(queue_id)
        error = self.storage_error(queue_id)  # opens the shards before the catalog forgets the queue
        if error is not None and not force:
            raise CorruptStorage(
                f"queue {queue.queue_name!r} has damaged storage ({error}); deleting it with force "
                f"(`conveyor queues delete --force {queue.queue_name}`) keeps the damaged files in "
                f"{DAMAGED_DIR}/ of the deployment for inspection"
            )
        numbers = self.catalog.delete_queue(queue_id)
        self._catalog_written()
        opened = {shard.number: shard for shard in self.router.drop(queue_id)}
        kept_aside: list[str] = []
        for number in numbers:
            path = self.directory / "shards" / f"{queue_id}.{number}.db"
            shard = opened.get(number)
            if shard is not None and self._tombstone(shard):
                for suffix in SHARD_FILE_SUFFIXES:
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
            else:
                kept_aside.extend(keep_aside(self.directory, path))
        if kept_aside:
            log.warning("deleted damaged queue %s; its files are kept in %s", queue.queue_name, ", ".join(kept_aside))
        return kept_aside

    @staticmethod
    def _tombstone(shard: Shard) -> bool:
        """Mark a deleted queue's shard so no process stores into it any more, and close it; False
        if its file is too damaged to take the mark (it is kept aside instead)."""
        try:
            shard.mark_deleted()
            return True
        except StorageFull:
            return True  # no room for the mark, nor for anyone's store: remove it, which frees space
        except StorageError:
            return False
        finally:
            shard.close()

    def add_shard(self, queue_id: str) -> int:
        count = self.catalog.add_shard(queue_id, self.clock.now_ms())
        self._catalog_written()
        self.router.make(queue_id, count - 1)
        log.info("queue %s now has %d shards", queue_id, count)
        return count

    # -- the driver's primitives (sharded.py) --------------------------------------------------
    def shard_map(self, queue_id: str) -> ShardMap[Shard]:
        return self.router.shard_map(queue_id)

    def home_shard(self, queue_id: str) -> Shard:
        """The shared policy's answer (``ShardedEngine.home_shard``), kept with the rest of a send's
        plan until the catalog snapshot's generation moves; :meth:`store` takes the plan from here."""
        snapshot = self.snapshots.current()
        plan = self._plans.get(queue_id)
        if plan is None or snapshot is None or plan.generation != snapshot.generation:
            plan = None
            shard = super().home_shard(queue_id)
            entry = snapshot.queues.get(queue_id) if snapshot is not None else None
            if snapshot is not None and entry is not None:
                plan = _SendPlan(snapshot.generation, shard, entry.settings.delivery_delay, len(entry.shards) == 1)
                self._plans[queue_id] = plan
        self._plan_used.plan = plan
        return shard if plan is None else plan.shard

    def enqueue(
        self, queue_id: str, messages: Sequence[NewMessage], *, urgent: bool = False, owed: bool = False
    ) -> SendBatchResult:
        """The shared ``ShardedEngine.enqueue`` (ids, home shard, store, announce), written out for
        the commonest send: one message to a queue whose send plan is current. One read of the
        catalog snapshot, and the plan goes straight to the store instead of through
        :meth:`home_shard` and a thread-local; a lone ``send()`` crosses four calls fewer. Anything
        else (a batch, a plan to make or remake) goes the shared way."""
        plan = self._plans.get(queue_id)
        snapshot = self.snapshots.current() if plan is not None and len(messages) == 1 else None
        if snapshot is None or plan is None or plan.generation != snapshot.generation:
            return super().enqueue(queue_id, messages, urgent=urgent, owed=owed)
        ids = new_ids(1)
        committed = functools.partial(self.wake, queue_id) if urgent else None
        metrics = self._store_one(queue_id, plan.shard, messages[0], ids[0], self.clock.now_ms(), plan, committed)
        self.announce(queue_id)
        return SendBatchResult(ids, self.metrics(queue_id) if metrics is None else metrics)

    def store(
        self,
        queue_id: str,
        shard: Shard,
        messages: Sequence[NewMessage],
        ids: list[str],
        now_ms: int,
        *,
        urgent: bool = False,
        owed: bool = False,
    ) -> Metrics | None:
        """Each queue's shards commit on committers of their own, so an ``urgent`` send (a wake-up
        someone waits for) never waits behind another queue's writes; it wakes this process's
        consumers of the queue at its commit, while its flush runs (they would see the commit
        then anyway, a poll later, as other processes' consumers do), and returns once it is
        flushed, as every send does. ``owed`` changes nothing: the record of what is owed is in
        workflows.db, another file, whose commits the shard's are not ordered with."""
        committed = functools.partial(self.wake, queue_id) if urgent else None
        plan: _SendPlan | None = getattr(self._plan_used, "plan", None)
        if plan is not None and plan.shard is not shard:  # not the plan this shard was chosen by
            plan = None
        if len(messages) == 1:
            return self._store_one(queue_id, shard, messages[0], ids[0], now_ms, plan, committed)
        delays = {m.delay_seconds for m in messages}
        # A message without a delay of its own takes the queue's, read now (from the snapshot).
        queue_delay = self.queue_settings(queue_id).delivery_delay if None in delays else 0
        rows: list[InsertRow] = [
            (ids[i], now_ms, stored_type(m.content_type, m.traceparent), m.body) for i, m in enumerate(messages)
        ]
        visible_at: int | list[int]
        if len(delays) == 1:
            (delay,) = delays
            visible_at = visible_at_ms(now_ms, queue_delay if delay is None else delay)
        else:
            visible_at = [
                visible_at_ms(now_ms, queue_delay if m.delay_seconds is None else m.delay_seconds) for m in messages
            ]
        count, nbytes, oldest = shard.insert(rows, visible_at, sum(len(m.body) for m in messages), committed=committed)
        # The shard's own figures are the queue's when it has no other shard.
        return Metrics(count, nbytes, oldest) if len(self.router.all(queue_id)) == 1 else None

    def _store_one(
        self,
        queue_id: str,
        shard: Shard,
        message: NewMessage,
        mid: str,
        now_ms: int,
        plan: _SendPlan | None,
        committed: Callable[[], None] | None,
    ) -> Metrics | None:
        """:meth:`store` of one message, by ``plan`` if it is the one ``shard`` was chosen by."""
        delay = message.delay_seconds
        if delay is None:  # the queue's, as of the plan's snapshot (or read now)
            delay = plan.delay if plan is not None else self.queue_settings(queue_id).delivery_delay
        row = (mid, now_ms, stored_type(message.content_type, message.traceparent), message.body)
        count, nbytes, oldest = shard.insert(
            (row,), visible_at_ms(now_ms, delay), len(message.body), committed=committed
        )
        single = plan.single if plan is not None else len(self.router.all(queue_id)) == 1
        return Metrics(count, nbytes, oldest) if single else None

    def lease_shard(
        self, queue_id: str, shard: Shard, now_ms: int, n: int, until_ms: int, token: int
    ) -> list[LeasedRow]:
        return shard.lease(now_ms, n, until_ms, token)

    def extend_shard(self, shard: Shard, leases: LeaseGroup, until_ms: int) -> None:
        shard.extend(leases, until_ms)

    def release_shard(self, shard: Shard, leases: LeaseGroup, now_ms: int) -> None:
        shard.release(leases, now_ms)

    def settle_shard(
        self, shard: Shard, acks: LeaseGroup, retries: LeaseGroup, max_deliveries: int, *, durable: bool = True
    ) -> ShardSettlement:
        return shard.settle(acks, retries, max_deliveries, durable=durable)

    def settle_and_lease_shard(
        self,
        queue_id: str,
        shard: Shard,
        acks: LeaseGroup,
        retries: LeaseGroup,
        max_deliveries: int,
        now_ms: int,
        n: int,
        until_ms: int,
        token: int,
        *,
        durable: bool = True,
    ) -> tuple[ShardSettlement, list[LeasedRow]]:
        return shard.settle_and_lease(acks, retries, max_deliveries, now_ms, n, until_ms, token, durable=durable)

    def move_leased(self, shard: Shard, leases: LeaseGroup, target: Shard | None, now_ms: int) -> int:
        """Two files, so two commits: the copy commits before the delete, and a crash in between
        leaves the message in both places (it is dead-lettered again: at least once)."""
        if target is not None:
            _copy(shard.leased_rows(leases), target, now_ms)
        return shard.remove_leased(leases, dead_lettered=target is not None)

    def move_oldest(self, shard: Shard, target: Shard, n: int, now_ms: int) -> int:
        rows = shard.oldest_rows(n)
        if not rows:
            return 0
        _copy(rows, target, now_ms)
        return shard.remove([r[0] for r in rows])

    def purge_shard(self, shard: Shard) -> int:
        return self.reserve.freeing(shard.purge)

    def expire_shard(self, shard: Shard, cutoff_ms: int) -> int:
        return shard.expire(cutoff_ms)

    def announce(self, queue_id: str) -> None:
        # Other processes see the commit itself (PRAGMA data_version, read by their waits).
        self.wake(queue_id)

    # -- reads --------------------------------------------------------------------------------
    def peek(self, queue_id: str, max_messages: int) -> list[StoredMessage]:
        out: list[StoredMessage] = []
        for shard in self.router.all(queue_id):
            for _, mid, ts, ctype, body, attempts in shard.peek(max_messages - len(out)):
                kind, traceparent = split_stored_type(ctype)
                out.append(StoredMessage(mid, ts, body, kind, attempts, "", traceparent))
            if len(out) >= max_messages:
                break
        return out

    def metrics(self, queue_id: str) -> Metrics:
        count = nbytes = 0
        oldest = 0
        for shard in self.router.all(queue_id):
            stats = shard.stats()
            count, nbytes = count + stats[0], nbytes + stats[1]
            first = shard.oldest()
            if first and (not oldest or first < oldest):
                oldest = first
        return Metrics(count, nbytes, oldest)

    def counters(self, queue_id: str) -> Counters:
        totals = [0] * 6
        in_flight = 0
        now = self.clock.now_ms()
        for shard in self.router.all(queue_id):
            stats = shard.stats()
            totals = [a + b for a, b in zip(totals, stats[2:], strict=True)]
            in_flight += shard.in_flight(now)
        sent, acked, retried, dead_lettered, expired, dropped = totals
        return Counters(sent, acked, retried, dead_lettered, expired, dropped, in_flight)

    def sent_count(self, queue_id: str) -> int:
        return sum(shard.stats()[2] for shard in self.router.all(queue_id))

    def next_visible_ms(self, queue_id: str) -> int | None:
        times = [t for s in self.router.all(queue_id) if (t := s.next_visible()) is not None]
        return min(times) if times else None

    # -- waking consumers ---------------------------------------------------------------------
    def wake(self, queue_id: str) -> None:
        cond = self._wake[queue_id]
        with cond:
            self._woken[queue_id] += 1
            if self._waiting[queue_id]:
                cond.notify_all()

    def wait(self, queue_id: str, timeout: float) -> None:
        """Return on a wake-up in this process since the last wait (even one that came before this
        call), on a commit by another process, or after ``timeout`` seconds."""
        shards = self.router.all(queue_id)
        deadline = time.monotonic() + timeout
        cond = self._wake[queue_id]
        with cond:
            self._waiting[queue_id] += 1
            try:
                while True:
                    if self._woken[queue_id] != self._seen_woken[queue_id]:
                        self._seen_woken[queue_id] = self._woken[queue_id]
                        return
                    if any([s.changed() for s in shards]):
                        return
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    cond.wait(min(remaining, CROSS_PROCESS_POLL_SECONDS))
            finally:
                self._waiting[queue_id] -= 1

    def deployment(self) -> Deployment:
        return Deployment("sqlite", str(self.directory))

    def acquire_leadership(self) -> bool:
        if self._leader_file is not None:
            return True
        handle = open(self.directory / "coordinator.lock", "a+b")  # noqa: SIM115 - held while leading
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            return False
        self._leader_file = handle
        return True

    def release_leadership(self) -> None:
        if self._leader_file is not None:
            self._leader_file.close()
            self._leader_file = None

    def close(self) -> None:
        self.release_leadership()
        self._registry.close()
        self.router.close()
        self.snapshots.close()
        self.catalog.close()
