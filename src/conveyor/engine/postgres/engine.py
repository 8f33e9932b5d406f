"""The PostgreSQL engine: any number of processes on any number of machines sharing one database.

Storage: one partition of ``messages`` per storage shard; the catalog and the shard map in plain
tables (``migrations/``). Every state transition is a named query in ``queries.sql`` that handles a
whole batch in one statement (lists travel as arrays).

Writes: every send, lease, ack, retry, extend and release of this engine goes through one
:class:`GroupCommitter`, so concurrent callers share pipelined transactions and WAL flushes.
Leasing is ``FOR UPDATE SKIP LOCKED``: processes never wait for each other's rows.

Routing: as in the SQLite engine, each engine takes a *home slot* the first time it sends and writes
a queue's messages to active shard ``slot % shards``; consumers lease from every shard, starting at a
rotating offset. Counters are striped: each engine updates its own row of ``shard_stats``.

Wake-ups: LISTEN/NOTIFY (:mod:`listener`). Leadership: a session advisory lock on a dedicated
connection, released by PostgreSQL the moment the leader's process (or connection) dies; the leader
vacuums the queue tables (:mod:`vacuum`).
"""

from __future__ import annotations

import logging
import random
import secrets
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

import psycopg

from conveyor.engine.base import Clock, Engine, SystemClock
from conveyor.engine.lease_ids import MALFORMED, lease_id, lease_id_parts, parse_lease_id
from conveyor.engine.postgres.catalog import STAT_SLOTS, Catalog
from conveyor.engine.postgres.database import ReadPool
from conveyor.engine.postgres.group_commit import Connection, WriteLanes
from conveyor.engine.postgres.leadership import AdvisoryLeadership
from conveyor.engine.postgres.listener import Listener, Notifier, channel_of
from conveyor.engine.postgres.migrate import migrate
from conveyor.engine.postgres.settings_cache import SettingsCache
from conveyor.engine.postgres.vacuum import Vacuumer
from conveyor.engine.postgres.worker_registry import WorkerRegistry
from conveyor.engine.queue_faults import QueueFaults
from conveyor.engine.rotation import Rotation
from conveyor.engine.sqlfile import load_queries
from conveyor.engine.sqlite.shard import MISSING, SUPERSEDED
from conveyor.errors import InvalidRequest, QueueExists, QueueNotFound
from conveyor.ids import new_ids
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

Q = {name: text.encode() for name, text in load_queries("conveyor.engine.postgres", "queries.sql").items()}
T = TypeVar("T")

# How long a process trusts its copy of a queue's shard map; shards added elsewhere show up after it.
SHARD_MAP_SECONDS = 1.0
# Write connections per engine (each a group committer); their counter slots differ, so they never
# wait for each other's row locks.
WRITE_LANES = 4
# Connections for leases and heartbeats (committed without waiting for the WAL flush): as many as
# the write lanes, so that threads leasing at once (pull consumers, several dispatchers) each run
# their statement on a server backend of their own instead of queueing on one.
LEASE_LANES = 4
REDRIVE_CHUNK = 500
WARNINGS = {"missing": MISSING, "superseded": SUPERSEDED}


class ShardRef(NamedTuple):
    key: int  # the partition: messages_<key>
    number: int  # the shard's number within its queue, as lease ids carry it
    state: str


class LeaseGroups:
    """Lease ids sorted by shard number, as parallel arrays for the batch statements."""

    def __init__(self) -> None:
        self.tokens: dict[int, list[int]] = defaultdict(list)
        self.seqs: dict[int, list[int]] = defaultdict(list)
        self.extra: dict[int, list[int]] = defaultdict(list)

    def add(self, shard: int, seq: int, token: int, extra: int = 0) -> None:
        self.tokens[shard].append(token)
        self.seqs[shard].append(seq)
        self.extra[shard].append(extra)

    def shards(self) -> set[int]:
        return set(self.tokens)


def _fetch_one(cur: psycopg.Cursor[tuple[Any, ...]]) -> Callable[[], int]:
    def finish() -> int:
        row = cur.fetchone()
        return int(row[0]) if row else 0

    return finish


class PostgresEngine(Engine):
    """Queues in one PostgreSQL database (or one schema of it: put it first in ``search_path``).

    >>> engine = PostgresEngine("postgresql://127.0.0.1/conveyor")
    >>> engine.create_queue("emails", QueueSettings()).queue_name
    'emails'
    """

    def __init__(self, url: str, clock: Clock | None = None) -> None:
        self.url = url
        self.clock = clock or SystemClock()
        migrate(url)
        self._pool = ReadPool(url)
        self.catalog = Catalog(self._pool)
        self._workers = WorkerRegistry(self._pool)
        self._writer = WriteLanes(url, WRITE_LANES, LEASE_LANES)
        self._listener = Listener(url)
        self._notifier = Notifier(url)
        self._stat_slot = random.randrange(STAT_SLOTS)
        self._home_slot: int | None = None
        self._maps: dict[str, tuple[float, list[ShardRef]]] = {}
        self._settings = SettingsCache()
        self._lock = threading.Lock()
        self._rotation = Rotation()
        self._leadership = AdvisoryLeadership(url)
        self.vacuumer = Vacuumer(url)
        self.expiry_faults = QueueFaults("retention expiry", log)

    # -- shard map ----------------------------------------------------------------------------
    def _shards(self, queue_id: str) -> list[ShardRef]:
        now = time.monotonic()
        with self._lock:
            cached = self._maps.get(queue_id)
        if cached is not None and now - cached[0] < SHARD_MAP_SECONDS:
            return cached[1]
        shards = [ShardRef(*row) for row in self.catalog.shards(queue_id)]
        if not shards:
            raise QueueNotFound(f"queue {queue_id!r} does not exist")
        with self._lock:
            self._maps[queue_id] = (now, shards)
        return shards

    def _slot(self, lane: int) -> int:
        """The counter row this engine's write lane updates."""
        return (self._stat_slot + lane) % STAT_SLOTS

    def _forget(self, queue_id: str) -> None:
        with self._lock:
            self._maps.pop(queue_id, None)
        self._settings.forget(queue_id)

    def _home(self, queue_id: str) -> ShardRef:
        shards = self._shards(queue_id)
        active = [s for s in shards if s.state == "active"] or shards
        if self._home_slot is None:
            self._home_slot = self.catalog.next_producer_slot()
        return active[self._home_slot % len(active)]

    def _keys(self, queue_id: str) -> list[int]:
        return [s.key for s in self._shards(queue_id)]

    def _group(
        self, queue_id: str, ids: Sequence[str], warnings: dict[str, str], delays: Sequence[int] = ()
    ) -> LeaseGroups:
        groups = LeaseGroups()
        numbers = {s.number for s in self._shards(queue_id)}
        for i, lid in enumerate(ids):
            parsed = parse_lease_id(lid)
            if parsed is None or parsed[0] not in numbers:
                warnings[lid] = MALFORMED
                continue
            shard, seq, token = parsed
            groups.add(shard, seq, token, delays[i] if delays else 0)
        return groups

    def _by_number(self, queue_id: str) -> dict[int, ShardRef]:
        return {s.number: s for s in self._shards(queue_id)}

    # -- catalog ------------------------------------------------------------------------------
    def create_queue(self, name: str, settings: QueueSettings, shards: int = 1) -> QueueInfo:
        return self.catalog.create_queue(name, settings, shards, self.clock.now_ms())

    def get_queue(self, name: str) -> QueueInfo:
        return self.catalog.get_queue(name)

    def get_queue_by_id(self, queue_id: str) -> QueueInfo:
        return self.catalog.get_queue_by_id(queue_id)

    def queue_settings(self, queue_id: str) -> QueueSettings:
        """The queue's settings, as of at most ``SETTINGS_SECONDS`` ago (``settings_cache.py``).
        Changes made through this engine apply at once; a pause made by another process is seen by
        the next lease or within ``SETTINGS_SECONDS``."""
        now = time.monotonic()
        cached = self._settings.get(queue_id, now)
        if cached is not None:
            return cached
        settings = self.catalog.queue_settings(queue_id)
        self._settings.remember(queue_id, settings, now)
        return settings

    def list_queues(self, prefix: str = "") -> list[QueueInfo]:
        return self.catalog.list_queues(prefix)

    def update_queue(self, queue_id: str, settings: QueueSettings) -> QueueInfo:
        info = self.catalog.update_queue(queue_id, settings)
        self._forget(queue_id)
        self._notifier.notify(channel_of(queue_id))
        return info

    def delete_queue(self, queue_id: str, *, force: bool = False) -> list[str]:
        self.catalog.delete_queue(queue_id)  # no files of its own to keep aside
        self._forget(queue_id)
        return []

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
        self._forget(queue_id)
        log.info("queue %s now has %d shards", queue_id, count)
        return count

    # -- messages -----------------------------------------------------------------------------
    def enqueue(self, queue_id: str, messages: Sequence[NewMessage]) -> SendBatchResult:
        now = self.clock.now_ms()
        ids = new_ids(len(messages))
        args = {
            "shard": self._home(queue_id).key,
            "ids": ids,
            "ts": [now] * len(messages),
            # None: the queue's delivery_delay, read by the statement itself.
            "visible": [None if m.delay_seconds is None else now + m.delay_seconds * 1000 for m in messages],
            "queue": queue_id,
            "ctypes": [m.content_type for m in messages],
            "bodies": [m.body for m in messages],
            "bytes": sum(len(m.body) for m in messages),
            "sent": len(messages),
            "shards": self._keys(queue_id),
            "now": now,
        }

        def op(conn: Connection, lane: int) -> Callable[[], tuple[Any, ...] | None]:
            return conn.execute(Q["enqueue"], {**args, "slot": self._slot(lane)}).fetchone

        row = self._writer.run(op)
        if row is None:
            self._forget(queue_id)
            raise QueueNotFound("the queue was deleted while this message was being sent")
        metrics = Metrics(int(row[0]), int(row[1]), int(row[2]))
        self._notifier.notify(channel_of(queue_id))
        return SendBatchResult(ids, metrics)

    def lease(
        self, queue_id: str, max_messages: int, visibility_ms: int, policy: DeliveryPolicy
    ) -> list[StoredMessage]:
        shards = self._shards(queue_id)
        out: list[StoredMessage] = []
        for shard in self._rotation.turn(shards):
            need = max_messages - len(out)
            if need <= 0:
                break
            now = self.clock.now_ms()
            token = secrets.randbits(62)
            args = {
                "shard": shard.key,
                "now": now,
                "n": need,
                "until": now + visibility_ms,
                "token": token,
                "queue": queue_id,
            }

            def op(conn: Connection, lane: int, args: dict[str, Any] = args) -> Callable[[], list[tuple[Any, ...]]]:
                # Binary results: bodies arrive as they are stored, not hex-encoded and decoded.
                return conn.execute(Q["lease"], args, binary=True).fetchall

            exhausted = LeaseGroups()
            read_at = time.monotonic()
            # Not fsynced: a lease lost in a server crash only makes its messages deliverable again.
            rows = self._writer.run(op, durable=False)
            if rows:
                delay, paused, retention = rows[0][6:]
                self._settings.remember(queue_id, QueueSettings(delay, paused, retention), read_at)
            prefix, suffix = lease_id_parts(shard.number, token)
            for seq, mid, ts, ctype, body, attempts, *_ in rows:
                if attempts > policy.max_deliveries:
                    exhausted.add(shard.number, seq, token)
                else:
                    out.append(StoredMessage(mid, ts, body, ctype, attempts, f"{prefix}{seq:x}{suffix}"))
            if exhausted.shards():
                self._dead_letter(queue_id, shard, exhausted, policy)
        return out

    def extend(self, queue_id: str, lease_ids: Sequence[str], visibility_ms: int) -> None:
        until = self.clock.now_ms() + visibility_ms
        self._each_shard(queue_id, lease_ids, "extend", {"until": until}, durable=False)

    def release(self, queue_id: str, lease_ids: Sequence[str]) -> None:
        self._each_shard(queue_id, lease_ids, "release", {"now": self.clock.now_ms()}, durable=True)

    def _each_shard(self, queue_id: str, ids: Sequence[str], query: str, extra: dict[str, int], durable: bool) -> None:
        """Extend (not durable: a lost heartbeat only shortens a lease) or release (durable, and
        the queue's consumers are woken) leases, shard by shard."""
        groups = self._group(queue_id, ids, {})
        shards = self._by_number(queue_id)
        for number in groups.shards():
            args = {"shard": shards[number].key, "tokens": groups.tokens[number], "seqs": groups.seqs[number], **extra}

            def op(conn: Connection, lane: int, args: dict[str, Any] = args) -> Callable[[], None]:
                conn.execute(Q[query], args)
                return lambda: None

            self._writer.run(op, durable=durable)
            if durable:
                self._notifier.notify(channel_of(queue_id))

    def settle(
        self,
        queue_id: str,
        acks: Sequence[str],
        retries: Sequence[tuple[str, int]],
        policy: DeliveryPolicy,
    ) -> SettleResult:
        warnings: dict[str, str] = {}
        now = self.clock.now_ms()
        shards = self._by_number(queue_id)
        ack_groups = self._group(queue_id, acks, warnings)
        retry_groups = self._group(queue_id, [lid for lid, _ in retries], warnings, [d for _, d in retries])
        acked = retried = dropped = dead = 0
        for number in sorted(ack_groups.shards() | retry_groups.shards()):
            shard = shards[number]
            args = {
                "shard": shard.key,
                "max_deliveries": policy.max_deliveries,
                "ack_tokens": ack_groups.tokens[number],
                "ack_seqs": ack_groups.seqs[number],
                "retry_tokens": retry_groups.tokens[number],
                "retry_seqs": retry_groups.seqs[number],
                "retry_at": [now + delay * 1000 for delay in retry_groups.extra[number]],
            }

            def op(conn: Connection, lane: int, args: dict[str, Any] = args) -> Callable[[], list[tuple[Any, ...]]]:
                return conn.execute(Q["settle"], {**args, "slot": self._slot(lane)}).fetchall

            exhausted = LeaseGroups()
            for kind, a, b in self._writer.run(op):
                if kind == "counts":
                    acked, retried = acked + a, retried + b
                elif kind == "exhausted":
                    exhausted.add(number, b, a)
                else:
                    warnings[lease_id(number, b, a)] = WARNINGS[kind]
            if exhausted.shards():
                moved = self._dead_letter(queue_id, shard, exhausted, policy)
                if policy.dead_letter_queue is None:
                    dropped += moved
                else:
                    dead += moved
        if retried:
            self._notifier.notify(channel_of(queue_id))
        return SettleResult(acked, retried, dead, dropped, warnings)

    def _dead_letter(self, queue_id: str, shard: ShardRef, held: LeaseGroups, policy: DeliveryPolicy) -> int:
        """Move messages whose deliveries ran out to the dead letter queue (or drop them)."""
        dlq_id = None if policy.dead_letter_queue is None else self._dead_letter_queue(policy.dead_letter_queue)
        args = {
            "shard": shard.key,
            "tokens": held.tokens[shard.number],
            "seqs": held.seqs[shard.number],
            "dlq_shard": None if dlq_id is None else self._home(dlq_id).key,
            "now": self.clock.now_ms(),
        }

        def op(conn: Connection, lane: int) -> Callable[[], int]:
            return _fetch_one(conn.execute(Q["dead_letter"], {**args, "slot": self._slot(lane)}))

        moved = self._writer.run(op)
        if dlq_id is not None and moved:
            self._notifier.notify(channel_of(dlq_id))
        if dlq_id is None and moved:
            log.warning(
                "queue %s: dropped %d messages after %d deliveries (no dead letter queue)",
                queue_id,
                moved,
                policy.max_deliveries,
            )
        return moved

    def _dead_letter_queue(self, name: str) -> str:
        try:
            return self.catalog.get_queue(name).queue_id
        except QueueNotFound:
            try:
                return self.create_queue(name, QueueSettings()).queue_id
            except QueueExists:
                return self.catalog.get_queue(name).queue_id

    def _per_shard(self, queue_id: str, query: str, extra: dict[str, int]) -> int:
        total = 0
        for shard in self._shards(queue_id):
            args = {"shard": shard.key, **extra}

            def op(conn: Connection, lane: int, args: dict[str, int] = args) -> Callable[[], int]:
                return _fetch_one(conn.execute(Q[query], {**args, "slot": self._slot(lane)}))

            total += self._writer.run(op)
        return total

    def purge(self, queue_id: str) -> int:
        return self._per_shard(queue_id, "purge", {})

    def expire(self) -> dict[str, int]:
        now = self.clock.now_ms()
        expired: dict[str, int] = {}
        for queue in self.list_queues():
            cutoff = now - queue.settings.message_retention_period * 1000
            with self.expiry_faults.isolated(queue):  # a queue deleted meanwhile is skipped too
                count = self._per_shard(queue.queue_id, "expire", {"cutoff": cutoff})
                if count:
                    expired[queue.queue_id] = count
                    log.info("queue %s: %d messages expired past retention", queue.queue_name, count)
        return expired

    def redrive(self, from_queue_id: str, to_queue_id: str) -> int:
        if from_queue_id == to_queue_id:
            # Rows are moved oldest-first until none are left; into the same queue that never ends.
            raise InvalidRequest(f"cannot redrive queue {from_queue_id!r} into itself")
        target = self._home(to_queue_id)
        moved = 0
        for shard in self._shards(from_queue_id):
            while True:
                args = {
                    "shard": shard.key,
                    "target": target.key,
                    "n": REDRIVE_CHUNK,
                    "now": self.clock.now_ms(),
                }

                def op(conn: Connection, lane: int, args: dict[str, int] = args) -> Callable[[], int]:
                    return _fetch_one(conn.execute(Q["move_oldest"], {**args, "slot": self._slot(lane)}))

                chunk = self._writer.run(op)
                self._notifier.notify(channel_of(to_queue_id))
                moved += chunk
                if chunk < REDRIVE_CHUNK:
                    break
        return moved

    # -- reads --------------------------------------------------------------------------------
    def _read(self, query: str, args: dict[str, Any]) -> list[tuple[Any, ...]]:
        return self._pool.run(lambda c: c.execute(Q[query], args).fetchall(), query)

    def peek(self, queue_id: str, max_messages: int) -> list[StoredMessage]:
        rows = self._read("peek", {"shards": self._keys(queue_id), "n": max_messages})
        return [StoredMessage(mid, ts, body, ctype, attempts, "") for _, mid, ts, ctype, body, attempts in rows]

    def metrics(self, queue_id: str) -> Metrics:
        count, nbytes, oldest = self._read("metrics", {"shards": self._keys(queue_id)})[0]
        return Metrics(int(count), int(nbytes), int(oldest))

    def counters(self, queue_id: str) -> Counters:
        row = self._read("counters", {"shards": self._keys(queue_id), "now": self.clock.now_ms()})[0]
        return Counters(*(int(v) for v in row))

    def next_visible_ms(self, queue_id: str) -> int | None:
        value = self._read("next_visible", {"shards": self._keys(queue_id)})[0][0]
        return None if value is None else int(value)

    # -- waking consumers ---------------------------------------------------------------------
    def wait(self, queue_id: str, timeout: float) -> None:
        self._listener.wait(channel_of(queue_id), timeout)

    def wake(self, queue_id: str) -> None:
        # A stopping dispatcher may be waiting up to max_batch_timeout for a batch to fill.
        self._listener.wake(channel_of(queue_id))

    # -- leadership ---------------------------------------------------------------------------
    def acquire_leadership(self) -> bool:
        """Hold the deployment's advisory lock (see ``leadership.py``); the leader also runs the
        :class:`Vacuumer` of the deployment's queue tables."""
        if not self._leadership.acquire():
            self.vacuumer.stop()  # leadership lost with its connection: so is the duty
            return False
        self.vacuumer.start()
        return True

    def release_leadership(self) -> None:
        self.vacuumer.stop()
        self._leadership.release()

    # -- the worker registry ------------------------------------------------------------------
    def record_worker(self, entry: WorkerEntry, registered_by: str = "") -> None:
        self._workers.record(entry, registered_by, self.clock.now_ms())

    def remove_worker(self, worker_id: str, registered_by: str = "") -> None:
        self._workers.remove(worker_id, registered_by)

    def list_workers(self) -> list[WorkerEntry]:
        return self._workers.list(self.clock.now_ms())

    def close(self) -> None:
        self.release_leadership()
        self._notifier.close()
        self._listener.close()
        self._writer.close()
        self._pool.close()
