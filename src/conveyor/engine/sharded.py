"""The policy both databases share, written once: an engine over storage shards.

A queue's messages live in one or more storage shards (a SQLite file, a PostgreSQL partition).
Which shard a producer writes to, how a lease walks the shards, what a lease id says, when a
message goes to its dead letter queue (and how that queue comes to exist), how expiry, purge and
redrive visit the shards: all of that is here, in :class:`ShardedEngine`. A database's engine
subclasses it and supplies the per-shard primitives below, as River's drivers and procrastinate's
connectors do for their managers.

What a driver supplies (``S`` is its shard: anything with a ``number``, its place in the queue):

- ``shard_map(queue_id)``: the queue's shards (``QueueNotFound`` if there is none), every one and
  those that take writes;
- ``store(queue_id, shard, messages, ids, now_ms, urgent=, owed=)``: store a batch in one shard,
  atomically and durably, each visible at now + its delay (the queue's ``delivery_delay`` when it
  has none); returns the queue's metrics, or ``None`` when only the queue's other shards could tell
  them; ``urgent`` (a wake-up someone waits for): ahead of the driver's other writes, if they
  queue; ``owed``: see ``Engine.enqueue``;
- ``lease_shard(queue_id, shard, now_ms, n, until_ms, token)``: lease up to ``n`` deliverable
  messages until ``until_ms`` under ``token``, counting the delivery; rows whose first six columns
  are ``(seq, id, timestamp_ms, content_type, body, attempts)``;
- ``extend_shard`` / ``release_shard``: move the end of the leases still held under their tokens
  (``release`` to now, giving back the delivery it counted);
- ``settle_shard(shard, acks, retries, max_deliveries)``: in one commit, delete the acked messages
  and make the retried ones visible at their times, for the leases still current; a retried message
  with no delivery left stays leased and is returned in ``exhausted``; a lease that matched nothing
  gets a warning (:data:`~conveyor.engine.lease_ids.MISSING` or ``SUPERSEDED``);
- optionally, ``settle_and_lease_shard(...)``: both of the above in one transaction (a dispatcher
  whose finished batch frees room takes the next as it settles); a driver that does not supply it
  leaves that lease to the dispatcher;
- ``move_leased(shard, leases, target, now_ms)``: move messages still held under their leases to
  the ``target`` shard (of another queue) as new, visible messages, or drop them (``None``); a crash
  may leave a message in both places, never in neither; returns how many left the shard;
- ``move_oldest(shard, target, n, now_ms)``: the same for the ``n`` oldest messages, whatever their
  state (redrive); ``purge_shard(shard)``, ``expire_shard(shard, cutoff_ms)``: delete every message,
  or those sent before the cutoff, at a cost of what goes (one stamped out of order may wait for a
  later round: late, never early); each returns a count and keeps the shard's counters right;
- ``announce(queue_id)``: messages may be deliverable now; wake the queue's consumers, in every
  process.

What this class promises in return: it calls them from many threads at once (a driver's shard
must be safe for that), only with shards of the queue's current map, and only with leases whose ids
parsed and name one of the queue's shards (anything else is a warning here, not a driver's call).
"""

from __future__ import annotations

import logging
import secrets
import threading
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from conveyor.codec import split_stored_type
from conveyor.engine.base import Clock, Engine
from conveyor.engine.lease_ids import MALFORMED, lease_id, lease_id_parts, parse_lease_id
from conveyor.engine.queue_faults import QueueFaults
from conveyor.engine.rotation import Rotation
from conveyor.errors import InvalidRequest, QueueExists, QueueNotFound
from conveyor.ids import new_ids
from conveyor.model import (
    ConsumerInfo,
    ConsumerSettings,
    ConsumerType,
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

# Messages a redrive moves per statement: a large queue moves in steps, never in one transaction.
REDRIVE_CHUNK = 500


class NumberedShard(Protocol):
    @property
    def number(self) -> int:
        """The shard's number within its queue, as lease ids carry it."""
        ...


S = TypeVar("S", bound=NumberedShard)


@dataclass(frozen=True, slots=True)
class ShardMap(Generic[S]):
    all: list[S]  # every shard, by number: consumers read them all
    active: list[S]  # the shards that take writes


class LeaseGroup:
    """The leases one call names in one shard, as parallel lists (the form batch statements take):
    message ``seqs[i]`` under ``tokens[i]``; ``times[i]`` is a retry's new visibility time."""

    __slots__ = ("seqs", "times", "tokens")

    def __init__(self) -> None:
        self.seqs: list[int] = []
        self.tokens: list[int] = []
        self.times: list[int] = []

    def add(self, seq: int, token: int, time_ms: int = 0) -> None:
        self.seqs.append(seq)
        self.tokens.append(token)
        self.times.append(time_ms)

    def __len__(self) -> int:
        return len(self.seqs)

    def by_token(self) -> dict[int, list[int]]:
        """Token -> its seqs, for statements that take one token at a time."""
        grouped: dict[int, list[int]] = {}
        for seq, token in zip(self.seqs, self.tokens, strict=True):
            grouped.setdefault(token, []).append(seq)
        return grouped

    def by_token_and_time(self) -> dict[tuple[int, int], list[int]]:
        """(token, time) -> seqs: the retries that one statement can make visible together."""
        grouped: dict[tuple[int, int], list[int]] = {}
        for seq, token, time_ms in zip(self.seqs, self.tokens, self.times, strict=True):
            grouped.setdefault((token, time_ms), []).append(seq)
        return grouped


@dataclass(slots=True)
class ShardSettlement:
    """What one shard's settle did."""

    acked: int = 0
    retried: int = 0
    # Retried messages whose deliveries are used up, still held under their leases.
    exhausted: LeaseGroup = field(default_factory=LeaseGroup)
    # (token, seq) -> warning text, for the leases that matched nothing.
    warnings: dict[tuple[int, int], str] = field(default_factory=dict)


class QueueCatalog(Protocol):
    """What the shared policy reads and writes in a driver's catalog."""

    def get_queue(self, name: str) -> QueueInfo: ...
    def get_queue_by_id(self, queue_id: str) -> QueueInfo: ...
    def next_producer_slot(self) -> int: ...
    def add_consumer(
        self, queue_id: str, type: ConsumerType, script_name: str, settings: ConsumerSettings, dlq: str
    ) -> ConsumerInfo: ...
    def update_consumer(self, consumer_id: str, settings: ConsumerSettings, dlq: str) -> ConsumerInfo: ...
    def remove_consumer(self, consumer_id: str) -> None: ...


class WorkerStore(Protocol):
    """A driver's worker registry (``worker_rows.py`` says what it keeps)."""

    def record(self, entry: WorkerEntry, registered_by: str, now_ms: int) -> None: ...
    def remove(self, worker_id: str, registered_by: str) -> None: ...
    def list(self, now_ms: int) -> list[WorkerEntry]: ...


class ShardedEngine(Engine, Generic[S]):
    """An engine over storage shards; a subclass supplies the per-shard primitives (module docstring)."""

    def __init__(self, clock: Clock, catalog: QueueCatalog, workers: WorkerStore) -> None:
        self.clock = clock
        self.catalog = catalog
        self._workers = workers
        self._rotation = Rotation()
        self._home_slot: int | None = None
        self._slot_lock = threading.Lock()
        self.expiry_faults = QueueFaults("retention expiry", log)

    # -- what a driver supplies ---------------------------------------------------------------
    @abstractmethod
    def shard_map(self, queue_id: str) -> ShardMap[S]: ...

    @abstractmethod
    def store(
        self,
        queue_id: str,
        shard: S,
        messages: Sequence[NewMessage],
        ids: list[str],
        now_ms: int,
        *,
        urgent: bool = False,
        owed: bool = False,
    ) -> Metrics | None: ...

    @abstractmethod
    def lease_shard(
        self, queue_id: str, shard: S, now_ms: int, n: int, until_ms: int, token: int
    ) -> Sequence[tuple[Any, ...]]: ...

    @abstractmethod
    def extend_shard(self, shard: S, leases: LeaseGroup, until_ms: int) -> None: ...

    @abstractmethod
    def release_shard(self, shard: S, leases: LeaseGroup, now_ms: int) -> None: ...

    @abstractmethod
    def settle_shard(
        self, shard: S, acks: LeaseGroup, retries: LeaseGroup, max_deliveries: int, *, durable: bool = True
    ) -> ShardSettlement: ...

    def settle_and_lease_shard(
        self,
        queue_id: str,
        shard: S,
        acks: LeaseGroup,
        retries: LeaseGroup,
        max_deliveries: int,
        now_ms: int,
        n: int,
        until_ms: int,
        token: int,
        *,
        durable: bool = True,
    ) -> tuple[ShardSettlement, Sequence[tuple[Any, ...]]] | None:
        """``settle_shard`` and ``lease_shard`` in one transaction, or None (this default) if the
        driver cannot: then only ``settle_shard`` is called."""
        return None

    @abstractmethod
    def move_leased(self, shard: S, leases: LeaseGroup, target: S | None, now_ms: int) -> int: ...

    @abstractmethod
    def move_oldest(self, shard: S, target: S, n: int, now_ms: int) -> int: ...

    @abstractmethod
    def purge_shard(self, shard: S) -> int: ...

    @abstractmethod
    def expire_shard(self, shard: S, cutoff_ms: int) -> int: ...

    @abstractmethod
    def announce(self, queue_id: str) -> None: ...

    # -- routing ------------------------------------------------------------------------------
    def home_shard(self, queue_id: str) -> S:
        """The shard this engine writes the queue's messages to: active shard ``slot % shards``,
        where the slot is the engine's own, taken from the catalog the first time it sends. So
        producers spread over a queue's shards while each keeps one write path (one group commit)."""
        shards = self.shard_map(queue_id)
        active = shards.active or shards.all
        slot = self._home_slot
        if slot is None:
            with self._slot_lock:
                if self._home_slot is None:
                    self._home_slot = self.catalog.next_producer_slot()
                slot = self._home_slot
        return active[slot % len(active)]

    def _by_number(self, queue_id: str) -> dict[int, S]:
        return {s.number: s for s in self.shard_map(queue_id).all}

    @staticmethod
    def _group(
        shards: dict[int, S], ids: Sequence[str], warnings: dict[str, str], times: Sequence[int] = ()
    ) -> dict[int, LeaseGroup]:
        """Lease ids by shard number; an id that is malformed or names no shard of the queue gets a
        warning. ``times`` (one per id) travel with them: a retry's visibility time."""
        groups: dict[int, LeaseGroup] = {}
        for i, lid in enumerate(ids):
            parsed = parse_lease_id(lid)
            if parsed is None or parsed[0] not in shards:
                warnings[lid] = MALFORMED
                continue
            number, seq, token = parsed
            group = groups.get(number)
            if group is None:
                group = groups[number] = LeaseGroup()
            group.add(seq, token, times[i] if times else 0)
        return groups

    # -- catalog ------------------------------------------------------------------------------
    def get_queue(self, name: str) -> QueueInfo:
        return self.catalog.get_queue(name)

    def get_queue_by_id(self, queue_id: str) -> QueueInfo:
        return self.catalog.get_queue_by_id(queue_id)

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

    # -- messages -----------------------------------------------------------------------------
    def enqueue(
        self, queue_id: str, messages: Sequence[NewMessage], *, urgent: bool = False, owed: bool = False
    ) -> SendBatchResult:
        ids = new_ids(len(messages))
        shard = self.home_shard(queue_id)
        metrics = self.store(queue_id, shard, messages, ids, self.clock.now_ms(), urgent=urgent, owed=owed)
        self.announce(queue_id)
        return SendBatchResult(ids, self.metrics(queue_id) if metrics is None else metrics)

    def lease(
        self, queue_id: str, max_messages: int, visibility_ms: int, policy: DeliveryPolicy
    ) -> list[StoredMessage]:
        """Each call starts one shard further along (``rotation.py``), so no shard waits behind another."""
        out: list[StoredMessage] = []
        for shard in self._rotation.turn(self.shard_map(queue_id).all):
            need = max_messages - len(out)
            if need <= 0:
                break
            now = self.clock.now_ms()
            token = secrets.randbits(62)
            rows = self.lease_shard(queue_id, shard, now, need, now + visibility_ms, token)
            out.extend(self._delivered(queue_id, shard, token, rows, policy))
        return out

    def _delivered(
        self, queue_id: str, shard: S, token: int, rows: Sequence[tuple[Any, ...]], policy: DeliveryPolicy
    ) -> list[StoredMessage]:
        """The rows a lease of ``shard`` under ``token`` took, as messages; those whose lease ran out
        on their last delivery go to the dead letter queue instead."""
        out: list[StoredMessage] = []
        exhausted = LeaseGroup()
        prefix, suffix = lease_id_parts(shard.number, token)
        for seq, mid, ts, ctype, body, attempts, *_ in rows:
            if attempts > policy.max_deliveries:  # its lease ran out on its last delivery
                exhausted.add(seq, token)
            else:
                kind, traceparent = split_stored_type(ctype)
                out.append(StoredMessage(mid, ts, body, kind, attempts, f"{prefix}{seq:x}{suffix}", traceparent))
        if exhausted:
            self._dead_letter(queue_id, shard, exhausted, policy)
        return out

    def extend(self, queue_id: str, lease_ids: Sequence[str], visibility_ms: int) -> None:
        until = self.clock.now_ms() + visibility_ms
        shards = self._by_number(queue_id)
        for number, leases in self._group(shards, lease_ids, {}).items():
            self.extend_shard(shards[number], leases, until)

    def release(self, queue_id: str, lease_ids: Sequence[str]) -> None:
        now = self.clock.now_ms()
        shards = self._by_number(queue_id)
        groups = self._group(shards, lease_ids, {})
        for number, leases in groups.items():
            self.release_shard(shards[number], leases, now)
        if groups:
            self.announce(queue_id)

    def settle(
        self,
        queue_id: str,
        acks: Sequence[str],
        retries: Sequence[tuple[str, int]],
        policy: DeliveryPolicy,
        *,
        durable: bool = True,
    ) -> SettleResult:
        return self._settle(queue_id, acks, retries, policy, durable, 0, 0)[0]

    def settle_and_lease(
        self,
        queue_id: str,
        acks: Sequence[str],
        retries: Sequence[tuple[str, int]],
        policy: DeliveryPolicy,
        lease: int,
        visibility_ms: int,
        *,
        durable: bool = True,
    ) -> tuple[SettleResult, list[StoredMessage]]:
        """In one transaction when the queue has one shard (the lease of a queue of several walks
        them in turn) and the driver supplies ``settle_and_lease_shard``; else it leases nothing."""
        return self._settle(queue_id, acks, retries, policy, durable, lease, visibility_ms)

    def _settle(
        self,
        queue_id: str,
        acks: Sequence[str],
        retries: Sequence[tuple[str, int]],
        policy: DeliveryPolicy,
        durable: bool,
        lease: int,
        visibility_ms: int,
    ) -> tuple[SettleResult, list[StoredMessage]]:
        warnings: dict[str, str] = {}
        now = self.clock.now_ms()
        shards = self._by_number(queue_id)
        delays = dict(retries)  # a lease id retried twice in one call: the last delay counts
        ack_groups = self._group(shards, acks, warnings)
        retry_groups = self._group(shards, list(delays), warnings, [now + d * 1000 for d in delays.values()])
        acked = retried = dead = dropped = 0
        leased: list[StoredMessage] = []
        for number in sorted(ack_groups.keys() | retry_groups.keys()):
            shard = shards[number]
            acks_here, retries_here = ack_groups.get(number) or LeaseGroup(), retry_groups.get(number) or LeaseGroup()
            both = None
            if lease > 0 and len(shards) == 1:
                lease_token = secrets.randbits(62)
                both = self.settle_and_lease_shard(
                    queue_id, shard, acks_here, retries_here, policy.max_deliveries, now, lease,
                    now + visibility_ms, lease_token, durable=durable,
                )  # fmt: skip
            if both is None:
                result = self.settle_shard(shard, acks_here, retries_here, policy.max_deliveries, durable=durable)
            else:
                result, rows = both
                leased = self._delivered(queue_id, shard, lease_token, rows, policy)
            acked, retried = acked + result.acked, retried + result.retried
            for (token, seq), text in result.warnings.items():
                warnings[lease_id(number, seq, token)] = text
            if result.exhausted:
                moved = self._dead_letter(queue_id, shard, result.exhausted, policy)
                if policy.dead_letter_queue is None:
                    dropped += moved
                else:
                    dead += moved
        if retried:
            self.announce(queue_id)
        return SettleResult(acked, retried, dead, dropped, warnings), leased

    def _dead_letter(self, queue_id: str, shard: S, held: LeaseGroup, policy: DeliveryPolicy) -> int:
        """Move messages whose deliveries ran out to the dead letter queue (made if missing), or
        drop them when the policy names none; returns how many left the queue."""
        dlq = None if policy.dead_letter_queue is None else self._dead_letter_queue(policy.dead_letter_queue)
        target = None if dlq is None else self.home_shard(dlq)
        moved = self.move_leased(shard, held, target, self.clock.now_ms())
        if dlq is not None and moved:
            self.announce(dlq)
        if dlq is None and moved:
            log.warning(
                "queue %s: dropped %d messages after %d deliveries (no dead letter queue)",
                queue_id,
                moved,
                policy.max_deliveries,
            )
        return moved

    def _dead_letter_queue(self, name: str) -> str:
        try:
            return self.get_queue(name).queue_id
        except QueueNotFound:
            try:
                return self.create_queue(name, QueueSettings()).queue_id
            except QueueExists:  # another process made it meanwhile; any other error is the caller's
                return self.get_queue(name).queue_id

    def purge(self, queue_id: str) -> int:
        return sum(self.purge_shard(shard) for shard in self.shard_map(queue_id).all)

    def expire(self) -> dict[str, int]:
        """One queue's storage failing skips that queue only (``queue_faults.py``)."""
        now = self.clock.now_ms()
        expired: dict[str, int] = {}
        for queue in self.list_queues():
            cutoff = now - queue.settings.message_retention_period * 1000
            with self.expiry_faults.isolated(queue):  # a queue deleted meanwhile is skipped too
                count = sum(self.expire_shard(shard, cutoff) for shard in self.shard_map(queue.queue_id).all)
                if count:
                    expired[queue.queue_id] = count
                    log.info("queue %s: %d messages expired past retention", queue.queue_name, count)
        return expired

    def redrive(self, from_queue_id: str, to_queue_id: str) -> int:
        if from_queue_id == to_queue_id:
            # Rows are moved oldest-first until none are left; into the same queue that never ends.
            raise InvalidRequest(f"cannot redrive queue {from_queue_id!r} into itself")
        target = self.home_shard(to_queue_id)
        moved = 0
        for shard in self.shard_map(from_queue_id).all:
            while chunk := self.move_oldest(shard, target, REDRIVE_CHUNK, self.clock.now_ms()):
                moved += chunk
                self.announce(to_queue_id)
        return moved

    # -- the worker registry ------------------------------------------------------------------
    def record_worker(self, entry: WorkerEntry, registered_by: str = "") -> None:
        self._workers.record(entry, registered_by, self.clock.now_ms())

    def remove_worker(self, worker_id: str, registered_by: str = "") -> None:
        self._workers.remove(worker_id, registered_by)

    def list_workers(self) -> list[WorkerEntry]:
        return self._workers.list(self.clock.now_ms())
