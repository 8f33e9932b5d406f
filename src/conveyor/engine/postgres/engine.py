"""The PostgreSQL engine: any number of processes on any number of machines sharing one database.

Storage: one partition of ``messages`` per storage shard; the catalog and the shard map in plain
tables (``migrations/``). Every state transition is a named query in ``queries.sql`` that handles a
whole batch in one statement (lists travel as arrays).

Writes: every send, lease, ack, retry, extend and release of this engine goes through one
:class:`GroupCommitter`, so concurrent callers share pipelined transactions and WAL flushes.
Leasing is ``FOR UPDATE SKIP LOCKED``: processes never wait for each other's rows.

The policy both engines share (home shards, leases across shards, dead letters, expiry, redrive) is
``sharded.py``'s; this class supplies it the statements on one partition. Counters are striped: each
engine updates its own row of ``shard_stats``.

Wake-ups: LISTEN/NOTIFY (:mod:`listener`). Leadership: a session advisory lock on a dedicated
connection, released by PostgreSQL the moment the leader's process (or connection) dies; the leader
vacuums the queue tables (:mod:`vacuum`).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

import psycopg

from conveyor.codec import split_stored_type, stored_type
from conveyor.deployment import Deployment
from conveyor.engine.base import Clock, SystemClock
from conveyor.engine.lease_ids import MISSING, SUPERSEDED
from conveyor.engine.postgres.catalog import STAT_SLOTS, Catalog
from conveyor.engine.postgres.database import ReadPool
from conveyor.engine.postgres.group_commit import Connection, WriteLanes
from conveyor.engine.postgres.leadership import AdvisoryLeadership
from conveyor.engine.postgres.listener import Listener, Notifier, channel_of
from conveyor.engine.postgres.migrate import migrate
from conveyor.engine.postgres.settings_cache import SettingsCache
from conveyor.engine.postgres.vacuum import Vacuumer
from conveyor.engine.postgres.worker_registry import WorkerRegistry
from conveyor.engine.sharded import LeaseGroup, ShardedEngine, ShardMap, ShardSettlement
from conveyor.engine.sqlfile import load_queries
from conveyor.errors import QueueNotFound
from conveyor.model import Counters, Metrics, NewMessage, QueueInfo, QueueSettings, StoredMessage, visible_at_ms

log = logging.getLogger("conveyor.engine")

Q = {name: text.encode() for name, text in load_queries("conveyor.engine.postgres", "queries.sql").items()}
T = TypeVar("T")
Cursor = psycopg.Cursor[tuple[Any, ...]]

# How long a process trusts its copy of a queue's shard map; shards added elsewhere show up after it.
SHARD_MAP_SECONDS = 1.0
# Write connections per engine (each a group committer); their counter slots differ, so they never
# wait for each other's row locks.
WRITE_LANES = 4
# Connections for leases and heartbeats (committed without waiting for the WAL flush): as many as
# the write lanes, so that threads leasing at once (pull consumers, several dispatchers) each run
# their statement on a server backend of their own instead of queueing on one.
LEASE_LANES = 4
WARNINGS = {"missing": MISSING, "superseded": SUPERSEDED}
# The expiry boundary of a shard whose sent messages are all past retention: past every seq.
NO_BOUNDARY = 2**63 - 1


class ShardRef(NamedTuple):
    key: int  # the partition: messages_<key>
    number: int  # the shard's number within its queue, as lease ids carry it
    state: str


def _count(cursor: Cursor) -> int:
    row = cursor.fetchone()
    return int(row[0]) if row else 0


def _row(cursor: Cursor) -> tuple[Any, ...] | None:
    return cursor.fetchone()


def _rows(cursor: Cursor) -> list[tuple[Any, ...]]:
    return cursor.fetchall()


def _nothing(cursor: Cursor) -> None:
    return None


class PostgresEngine(ShardedEngine[ShardRef]):
    """Queues in one PostgreSQL database (or one schema of it: put it first in ``search_path``).

    >>> engine = PostgresEngine("postgresql://127.0.0.1/conveyor")
    >>> engine.create_queue("emails", QueueSettings()).queue_name
    'emails'
    """

    def __init__(self, url: str, clock: Clock | None = None) -> None:
        self.url = url
        migrate(url)
        self._pool = ReadPool(url)
        self.catalog: Catalog = Catalog(self._pool)
        super().__init__(clock or SystemClock(), self.catalog, WorkerRegistry(self._pool))
        self._writer = WriteLanes(url, WRITE_LANES, LEASE_LANES)
        self._listener = Listener(url)
        self._notifier = Notifier(url)
        self._stat_slot = random.randrange(STAT_SLOTS)
        self._maps: dict[str, tuple[float, ShardMap[ShardRef]]] = {}
        self._settings = SettingsCache()
        self._lock = threading.Lock()
        self._leadership = AdvisoryLeadership(url)
        self.vacuumer = Vacuumer(url)

    # -- shard map ----------------------------------------------------------------------------
    def shard_map(self, queue_id: str) -> ShardMap[ShardRef]:
        now = time.monotonic()
        with self._lock:
            cached = self._maps.get(queue_id)
        if cached is not None and now - cached[0] < SHARD_MAP_SECONDS:
            return cached[1]
        shards = [ShardRef(*row) for row in self.catalog.shards(queue_id)]
        if not shards:
            raise QueueNotFound(f"queue {queue_id!r} does not exist")
        shard_map = ShardMap(shards, [s for s in shards if s.state == "active"])
        with self._lock:
            self._maps[queue_id] = (now, shard_map)
        return shard_map

    def _slot(self, lane: int) -> int:
        """The counter row this engine's write lane updates."""
        return (self._stat_slot + lane) % STAT_SLOTS

    def _forget(self, queue_id: str) -> None:
        with self._lock:
            self._maps.pop(queue_id, None)
        self._settings.forget(queue_id)

    def _keys(self, queue_id: str) -> list[int]:
        return [s.key for s in self.shard_map(queue_id).all]

    # -- catalog ------------------------------------------------------------------------------
    def create_queue(self, name: str, settings: QueueSettings, shards: int = 1) -> QueueInfo:
        return self.catalog.create_queue(name, settings, shards, self.clock.now_ms())

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

    def dead_letter_sources(self, queue_name: str) -> list[str]:
        return self.catalog.dead_letter_sources(queue_name)

    def queue_names(self, prefix: str = "") -> list[str]:
        return self.catalog.queue_names(prefix)

    def queues_named(self, names: Sequence[str]) -> list[QueueInfo]:
        return self.catalog.queues_named(names)

    def update_queue(self, queue_id: str, settings: QueueSettings) -> QueueInfo:
        info = self.catalog.update_queue(queue_id, settings)
        self._forget(queue_id)
        self.announce(queue_id)
        return info

    def delete_queue(self, queue_id: str, *, force: bool = False) -> list[str]:
        self.catalog.delete_queue(queue_id)  # no files of its own to keep aside
        self._forget(queue_id)
        return []

    def add_shard(self, queue_id: str) -> int:
        count = self.catalog.add_shard(queue_id, self.clock.now_ms())
        self._forget(queue_id)
        log.info("queue %s now has %d shards", queue_id, count)
        return count

    # -- the driver's primitives (sharded.py): one statement each ---------------------------------
    def _write(
        self,
        query: str,
        args: dict[str, Any],
        read: Callable[[Cursor], T],
        *,
        durable: bool = True,
        binary: bool = False,
        urgent: bool = False,
        quick: bool | None = None,
    ) -> T:
        """Run one named statement through the write lanes (group commit); ``read`` takes its result
        once the group has committed. ``durable=False``: a loss in a server crash is harmless.
        ``urgent``: on the lane kept for wake-ups; ``quick``: on the lanes of leases and heartbeats
        (by default: not ``durable``; :class:`WriteLanes`)."""

        def op(conn: Connection, lane: int) -> Callable[[], T]:
            cursor = conn.execute(Q[query], {**args, "slot": self._slot(lane)}, binary=binary)
            return lambda: read(cursor)

        return self._writer.run(op, durable=durable, urgent=urgent, quick=quick)

    def store(
        self,
        queue_id: str,
        shard: ShardRef,
        messages: Sequence[NewMessage],
        ids: list[str],
        now_ms: int,
        *,
        urgent: bool = False,
        owed: bool = False,
    ) -> Metrics | None:
        """``owed``: committed without waiting for the WAL flush (see ``Engine.enqueue``): the
        caller's record of the send, committed before it, is deleted only by a later commit, which
        flushes this one first. ``urgent``: this process's consumers of the queue are woken at
        once, without waiting for the NOTIFY's trip through the server (other processes' are
        woken by it, as for any send)."""
        args = {
            "shard": shard.key,
            "ids": ids,
            "ts": [now_ms] * len(messages),
            # None: the queue's delivery_delay, read by the statement itself.
            "visible": [None if m.delay_seconds is None else visible_at_ms(now_ms, m.delay_seconds) for m in messages],
            "queue": queue_id,
            "ctypes": [stored_type(m.content_type, m.traceparent) for m in messages],
            "bodies": [m.body for m in messages],
            "bytes": sum(len(m.body) for m in messages),
            "sent": len(messages),
            "shards": self._keys(queue_id),
            "now": now_ms,
        }
        row = self._write("enqueue", args, _row, urgent=urgent, durable=not owed)
        if row is None:
            self._forget(queue_id)
            raise QueueNotFound("the queue was deleted while this message was being sent")
        if urgent:
            self.wake(queue_id)
        return Metrics(int(row[0]), int(row[1]), int(row[2]))

    def lease_shard(
        self, queue_id: str, shard: ShardRef, now_ms: int, n: int, until_ms: int, token: int
    ) -> list[tuple[Any, ...]]:
        """Not fsynced: a lease lost in a server crash only makes its messages deliverable again.
        Binary results: bodies arrive as they are stored, not hex-encoded and decoded."""
        args = {"shard": shard.key, "now": now_ms, "n": n, "until": until_ms, "token": token, "queue": queue_id}
        read_at = time.monotonic()
        rows = self._write("lease", args, _rows, durable=False, binary=True)
        if rows:  # the queue's settings come with each row: a pause made elsewhere is seen at once
            delay, paused, retention = rows[0][6:]
            self._settings.remember(queue_id, QueueSettings(delay, paused, retention), read_at)
        return rows

    def extend_shard(self, shard: ShardRef, leases: LeaseGroup, until_ms: int) -> None:
        """Not durable: a lost heartbeat only shortens a lease."""
        args = {"shard": shard.key, "tokens": leases.tokens, "seqs": leases.seqs, "until": until_ms}
        self._write("extend", args, _nothing, durable=False)

    def release_shard(self, shard: ShardRef, leases: LeaseGroup, now_ms: int) -> None:
        args = {"shard": shard.key, "tokens": leases.tokens, "seqs": leases.seqs, "now": now_ms}
        self._write("release", args, _nothing)

    def settle_shard(
        self, shard: ShardRef, acks: LeaseGroup, retries: LeaseGroup, max_deliveries: int, *, durable: bool = True
    ) -> ShardSettlement:
        args = {
            "shard": shard.key,
            "max_deliveries": max_deliveries,
            "ack_tokens": acks.tokens,
            "ack_seqs": acks.seqs,
            "retry_tokens": retries.tokens,
            "retry_seqs": retries.seqs,
            "retry_at": retries.times,
        }
        result = ShardSettlement()
        # Not among the leases even when it need not wait for its flush: a thousand runs' acks would
        # hold the leases up.
        for kind, a, b in self._write("settle", args, _rows, durable=durable, quick=False):
            if kind == "counts":
                result.acked, result.retried = a, b
            elif kind == "exhausted":
                result.exhausted.add(b, a)
            else:
                result.warnings[(a, b)] = WARNINGS[kind]
        return result

    def move_leased(self, shard: ShardRef, leases: LeaseGroup, target: ShardRef | None, now_ms: int) -> int:
        """One statement: the move is one transaction, never in both queues."""
        args = {
            "shard": shard.key,
            "tokens": leases.tokens,
            "seqs": leases.seqs,
            "dlq_shard": None if target is None else target.key,
            "now": now_ms,
        }
        return self._write("dead_letter", args, _count)

    def move_oldest(self, shard: ShardRef, target: ShardRef, n: int, now_ms: int) -> int:
        return self._write("move_oldest", {"shard": shard.key, "target": target.key, "n": n, "now": now_ms}, _count)

    def purge_shard(self, shard: ShardRef) -> int:
        return self._write("purge", {"shard": shard.key}, _count)

    def expire_shard(self, shard: ShardRef, cutoff_ms: int) -> int:
        args = {"shard": shard.key, "cutoff": cutoff_ms}
        boundary = self._read("expiry_boundary", args)
        return self._write("expire", {**args, "boundary": boundary[0][0] if boundary else NO_BOUNDARY}, _count)

    def announce(self, queue_id: str) -> None:
        self._notifier.notify(channel_of(queue_id))

    # -- reads --------------------------------------------------------------------------------
    def _read(self, query: str, args: dict[str, Any]) -> list[tuple[Any, ...]]:
        return self._pool.run(lambda c: c.execute(Q[query], args).fetchall(), query)

    def peek(self, queue_id: str, max_messages: int) -> list[StoredMessage]:
        rows = self._read("peek", {"shards": self._keys(queue_id), "n": max_messages})
        out = []
        for _, mid, ts, ctype, body, attempts in rows:
            kind, traceparent = split_stored_type(ctype)
            out.append(StoredMessage(mid, ts, body, kind, attempts, "", traceparent))
        return out

    def metrics(self, queue_id: str) -> Metrics:
        count, nbytes, oldest = self._read("metrics", {"shards": self._keys(queue_id)})[0]
        return Metrics(int(count), int(nbytes), int(oldest))

    def counters(self, queue_id: str) -> Counters:
        row = self._read("counters", {"shards": self._keys(queue_id), "now": self.clock.now_ms()})[0]
        return Counters(*(int(v) for v in row))

    def sent_count(self, queue_id: str) -> int:
        return int(self._read("sent", {"shards": self._keys(queue_id)})[0][0])

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
    def deployment(self) -> Deployment:
        return Deployment("postgresql", self.url)

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

    def close(self) -> None:
        self.release_leadership()
        self._notifier.close()
        self._listener.close()
        self._writer.close()
        self._pool.close()
