"""The embedded engine: a directory with ``catalog.db`` and one ``shards/QUEUE_ID.N.db`` per shard.

Routing (``router.py``): each process writes a queue's messages to its home shard; consumers lease
from every shard, starting at a rotating offset. A queue's settings and shard map come from the
catalog snapshot, a read of shared memory (``snapshot_store.py``).

Wake-ups: a send wakes consumers in the same process at once (a condition variable). Consumers in
other processes notice a commit through SQLite's ``PRAGMA data_version``, read from shared memory
every few milliseconds while they wait — a read of the WAL index, not of the disk.
"""

from __future__ import annotations

import dataclasses
import fcntl
import logging
import os
import secrets
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import BinaryIO

from conveyor.engine.base import Clock, Engine, SystemClock
from conveyor.engine.lease_ids import MALFORMED, lease_id, lease_id_parts, parse_lease_id
from conveyor.engine.queue_faults import QueueFaults
from conveyor.engine.rotation import Rotation
from conveyor.engine.sqlite.catalog import Catalog
from conveyor.engine.sqlite.damaged import DAMAGED_DIR, SHARD_FILE_SUFFIXES, keep_aside
from conveyor.engine.sqlite.reserve import SpaceReserve, reserve_size
from conveyor.engine.sqlite.router import ShardRouter
from conveyor.engine.sqlite.shard import InsertRow, Row, Shard
from conveyor.engine.sqlite.snapshot_store import SnapshotStore
from conveyor.engine.sqlite.storage import ensure_directory
from conveyor.engine.sqlite.worker_registry import WorkerRegistry
from conveyor.errors import CorruptStorage, InvalidRequest, QueueExists, QueueNotFound, StorageError, StorageFull
from conveyor.ids import new_id, new_ids
from conveyor.model import (
    ConsumerInfo,
    ConsumerSettings,
    ConsumerType,
    Counters,
    DeliveryPolicy,
    Metrics,
    NewMessage,
    QueueInfo,
    QueueSettings,
    SendBatchResult,
    SettleResult,
    StoredMessage,
    WorkerEntry,
)

log = logging.getLogger("conveyor.engine")

# How often a waiting consumer looks for commits made by other processes.
CROSS_PROCESS_POLL_SECONDS = 0.004
REDRIVE_CHUNK = 500

Leases = dict[int, dict[int, list[int]]]  # shard -> token -> seqs


class SQLiteEngine(Engine):
    """Queues in a directory of SQLite files.

    >>> engine = SQLiteEngine("/var/lib/conveyor")
    >>> engine.create_queue("emails", QueueSettings()).queue_name
    'emails'
    """

    def __init__(self, directory: str | os.PathLike[str], clock: Clock | None = None) -> None:
        self.directory = Path(directory)
        self.clock = clock or SystemClock()
        self.reserve = SpaceReserve(self.directory / "reserve", reserve_size())  # a bad size: nothing made
        ensure_directory(self.directory)
        ensure_directory(self.directory / "shards")
        self.catalog = Catalog(self.directory / "catalog.db")
        self.reserve.restore()
        self._workers = WorkerRegistry(self.directory / "catalog.db")
        self._wake: dict[str, threading.Condition] = defaultdict(threading.Condition)
        # Wake-ups are counted, so one that comes while no one waits is kept for the next wait.
        self._woken: dict[str, int] = defaultdict(int)
        self._seen_woken: dict[str, int] = defaultdict(int)
        self._rotation = Rotation()
        self._leader_file: BinaryIO | None = None
        self.snapshots = SnapshotStore(self.directory / "snapshot" / "catalog", self.catalog)
        self.snapshots.refresh()  # a process may have died between a catalog commit and its publish
        self.router = ShardRouter(self.directory, self.catalog, self.snapshots)
        self.expiry_faults = QueueFaults("retention expiry", log)

    def _catalog_written(self) -> None:
        """After this engine's own commit to queues or shards: publish it to every process on the host."""
        self.snapshots.publish()
        self.router.forget()

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

    def get_queue(self, name: str) -> QueueInfo:
        return self.catalog.get_queue(name)

    def get_queue_by_id(self, queue_id: str) -> QueueInfo:
        return self.catalog.get_queue_by_id(queue_id)

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

    def add_consumer(
        self,
        queue_id: str,
        type: ConsumerType,
        script_name: str,
        settings: ConsumerSettings,
        dead_letter_queue: str,
    ) -> ConsumerInfo:
        return self.catalog.add_consumer(queue_id, type, script_name, settings, dead_letter_queue)

    def update_consumer(self, consumer_id: str, settings: ConsumerSettings, dead_letter_queue: str) -> ConsumerInfo:
        return self.catalog.update_consumer(consumer_id, settings, dead_letter_queue)

    def remove_consumer(self, consumer_id: str) -> None:
        self.catalog.remove_consumer(consumer_id)

    def add_shard(self, queue_id: str) -> int:
        count = self.catalog.add_shard(queue_id, self.clock.now_ms())
        self._catalog_written()
        self.router.make(queue_id, count - 1)
        log.info("queue %s now has %d shards", queue_id, count)
        return count

    # -- messages -----------------------------------------------------------------------------
    def enqueue(self, queue_id: str, messages: Sequence[NewMessage]) -> SendBatchResult:
        now = self.clock.now_ms()
        delays = {m.delay_seconds for m in messages}
        # A message without a delay of its own takes the queue's, read now (from the snapshot).
        queue_delay = self.queue_settings(queue_id).delivery_delay if None in delays else 0
        ids = new_ids(len(messages))
        rows: list[InsertRow] = [(ids[i], now, m.content_type, m.body) for i, m in enumerate(messages)]
        visible_at: int | list[int]
        if len(delays) == 1:
            (delay,) = delays
            visible_at = now + (queue_delay if delay is None else delay) * 1000
        else:
            visible_at = [now + (queue_delay if m.delay_seconds is None else m.delay_seconds) * 1000 for m in messages]
        home = self.router.home(queue_id)
        count, nbytes, oldest = home.insert(rows, visible_at, sum(len(m.body) for m in messages))
        self.wake(queue_id)
        shards = self.router.all(queue_id)
        if len(shards) == 1:
            return SendBatchResult(ids, Metrics(count, nbytes, oldest))
        return SendBatchResult(ids, self.metrics(queue_id))

    def lease(
        self, queue_id: str, max_messages: int, visibility_ms: int, policy: DeliveryPolicy
    ) -> list[StoredMessage]:
        shards = self.router.all(queue_id)
        out: list[StoredMessage] = []
        for shard in self._rotation.turn(shards):
            need = max_messages - len(out)
            if need <= 0:
                break
            now = self.clock.now_ms()
            token = secrets.randbits(62)
            exhausted: list[Row] = []
            prefix, suffix = lease_id_parts(shard.number, token)
            for seq, mid, ts, ctype, body, attempts in shard.lease(now, need, now + visibility_ms, token):
                if attempts > policy.max_deliveries:
                    exhausted.append((seq, mid, ts, ctype, body))
                else:
                    out.append(StoredMessage(mid, ts, body, ctype, attempts, f"{prefix}{seq:x}{suffix}"))
            if exhausted:
                self._dead_letter(queue_id, shard, [(token, row) for row in exhausted], policy)
        return out

    def _group(self, queue_id: str, ids: Iterable[str], warnings: dict[str, str]) -> Leases:
        grouped: Leases = defaultdict(lambda: defaultdict(list))
        numbers = self.router.by_number(queue_id)
        for lid in ids:
            parsed = parse_lease_id(lid)
            if parsed is None or parsed[0] not in numbers:
                warnings[lid] = MALFORMED
                continue
            shard, seq, token = parsed
            grouped[shard][token].append(seq)
        return grouped

    def extend(self, queue_id: str, lease_ids: Sequence[str], visibility_ms: int) -> None:
        until = self.clock.now_ms() + visibility_ms
        shards = self.router.by_number(queue_id)
        for number, leases in self._group(queue_id, lease_ids, {}).items():
            shards[number].extend(leases, until)

    def release(self, queue_id: str, lease_ids: Sequence[str]) -> None:
        now = self.clock.now_ms()
        shards = self.router.by_number(queue_id)
        for number, leases in self._group(queue_id, lease_ids, {}).items():
            shards[number].release(leases, now)
        self.wake(queue_id)

    def settle(
        self,
        queue_id: str,
        acks: Sequence[str],
        retries: Sequence[tuple[str, int]],
        policy: DeliveryPolicy,
    ) -> SettleResult:
        warnings: dict[str, str] = {}
        now = self.clock.now_ms()
        shards = self.router.by_number(queue_id)
        ack_groups = self._group(queue_id, acks, warnings)
        delays = dict(retries)
        retry_groups: dict[int, dict[tuple[int, int], list[int]]] = defaultdict(lambda: defaultdict(list))
        for number, leases in self._group(queue_id, delays, warnings).items():
            for token, seqs in leases.items():
                for seq in seqs:
                    visible_at = now + delays[lease_id(number, seq, token)] * 1000
                    retry_groups[number][(token, visible_at)].append(seq)
        acked = retried = dropped = dead = 0
        for number in set(ack_groups) | set(retry_groups):
            shard = shards[number]
            result = shard.settle(
                ack_groups.get(number, {}),
                retry_groups.get(number, {}),
                policy.max_deliveries,
                drop_exhausted=policy.dead_letter_queue is None,
            )
            acked, retried, dropped = acked + result.acked, retried + result.retried, dropped + result.dropped
            for (token, seq), text in result.warnings.items():
                warnings[lease_id(number, seq, token)] = text
            if result.exhausted:
                dead += self._dead_letter(queue_id, shard, result.exhausted, policy)
        if dropped:
            log.warning(
                "queue %s: dropped %d messages after %d deliveries (no dead letter queue)",
                queue_id,
                dropped,
                policy.max_deliveries,
            )
        if retried:
            self.wake(queue_id)
        return SettleResult(acked, retried, dead, dropped, warnings)

    def _dead_letter(self, queue_id: str, shard: Shard, held: list[tuple[int, Row]], policy: DeliveryPolicy) -> int:
        """Copy exhausted messages to the dead letter queue, then delete them here.

        The copy commits before the delete, so a crash in between leaves the message in both places
        (it will be dead-lettered again: at least once), never in neither.
        """
        if policy.dead_letter_queue is not None:
            dlq = self._dead_letter_queue(policy.dead_letter_queue)
            now = self.clock.now_ms()
            rows = [(mid, ts, ctype, body) for _, (_, mid, ts, ctype, body) in held]
            self.router.home(dlq).insert(rows, now, sum(len(r[3]) for r in rows), sent=False)
            self.wake(dlq)
        by_token: dict[int, list[int]] = defaultdict(list)
        for token, row in held:
            by_token[token].append(row[0])
        moved = 0
        for token, seqs in by_token.items():
            moved += shard.remove_leased(token, seqs, dead_lettered=policy.dead_letter_queue is not None)
        if policy.dead_letter_queue is None:
            log.warning("queue %s: dropped %d messages whose deliveries ran out", queue_id, moved)
        return moved

    def _dead_letter_queue(self, name: str) -> str:
        try:
            return self.catalog.get_queue(name).queue_id
        except QueueNotFound:
            try:
                return self.create_queue(name, QueueSettings()).queue_id
            except QueueExists:  # another process made it meanwhile; any other error is the caller's
                return self.catalog.get_queue(name).queue_id

    def purge(self, queue_id: str) -> int:
        return sum(self.reserve.freeing(shard.purge) for shard in self.router.all(queue_id))

    def peek(self, queue_id: str, max_messages: int) -> list[StoredMessage]:
        out: list[StoredMessage] = []
        for shard in self.router.all(queue_id):
            for _, mid, ts, ctype, body, attempts in shard.peek(max_messages - len(out)):
                out.append(StoredMessage(mid, ts, body, ctype, attempts, ""))
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

    def expire(self) -> dict[str, int]:
        now = self.clock.now_ms()
        expired: dict[str, int] = {}
        for queue in self.list_queues():
            cutoff = now - queue.settings.message_retention_period * 1000
            with self.expiry_faults.isolated(queue):
                count = sum(shard.expire(cutoff) for shard in self.router.all(queue.queue_id))
                if count:
                    expired[queue.queue_id] = count
                    log.info("queue %s: %d messages expired past retention", queue.queue_name, count)
        return expired

    def redrive(self, from_queue_id: str, to_queue_id: str) -> int:
        if from_queue_id == to_queue_id:
            # Rows are moved oldest-first until none are left; into the same queue that never ends.
            raise InvalidRequest(f"cannot redrive queue {from_queue_id!r} into itself")
        moved = 0
        target = self.router.home(to_queue_id)
        for shard in self.router.all(from_queue_id):
            while rows := shard.oldest_rows(REDRIVE_CHUNK):
                now = self.clock.now_ms()
                inserts: list[InsertRow] = [(mid, ts, ct, body) for _, mid, ts, ct, body in rows]
                target.insert(inserts, now, sum(len(r[3]) for r in inserts), sent=False)
                moved += shard.remove([r[0] for r in rows])
                self.wake(to_queue_id)
        return moved

    def next_visible_ms(self, queue_id: str) -> int | None:
        times = [t for s in self.router.all(queue_id) if (t := s.next_visible()) is not None]
        return min(times) if times else None

    # -- waking consumers ---------------------------------------------------------------------
    def wake(self, queue_id: str) -> None:
        cond = self._wake[queue_id]
        with cond:
            self._woken[queue_id] += 1
            cond.notify_all()

    def wait(self, queue_id: str, timeout: float) -> None:
        """Return on a wake-up in this process since the last wait (even one that came before this
        call), on a commit by another process, or after ``timeout`` seconds."""
        shards = self.router.all(queue_id)
        deadline = time.monotonic() + timeout
        cond = self._wake[queue_id]
        with cond:
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

    # -- the worker registry ------------------------------------------------------------------
    def record_worker(self, entry: WorkerEntry, registered_by: str = "") -> None:
        self._workers.record(entry, registered_by, self.clock.now_ms())

    def remove_worker(self, worker_id: str, registered_by: str = "") -> None:
        self._workers.remove(worker_id, registered_by)

    def list_workers(self) -> list[WorkerEntry]:
        return self._workers.list(self.clock.now_ms())

    def close(self) -> None:
        self.release_leadership()
        self._workers.close()
        self.router.close()
        self.snapshots.close()
        self.catalog.close()
