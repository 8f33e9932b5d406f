"""The engine interface: the state transitions of queues and messages, and nothing else.

Everything above this interface (Cloudflare's semantics, batching, autoscaling, the CLI, HTTP) is
written once; every engine passes the same conformance suite. An engine:

- is thread-safe, and safe to use from several processes at once on the same storage;
- makes every write durable before returning (group commit shares that cost between callers);
- reads time only from its ``clock``, so tests can drive time by hand.

Message life cycle, as the engine sees it::

    enqueue ──► stored (visible at now + delay) ──lease──► leased (visible again at lease end)
                  ▲                                          │
                  └────────── retry(delay) / release ────────┤
                                                             ├─ ack ──► deleted
                                                             └─ deliveries used up ──► dead letter
                                                                queue (or dropped)

A lease id names one delivery of one message. Acking or retrying with a lease id whose message has
been delivered again since (a newer lease) changes nothing and returns a warning; an ack after the
lease ran out, with no newer delivery, is accepted.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Protocol

from conveyor.deployment import Deployment
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


def prefix_range(prefix: str) -> tuple[str, str]:
    """``(low, high)``: the names that start with a non-empty ``prefix`` are those with
    ``low <= name < high`` in code point order, the form of a prefix match an index on the names
    answers (a ``LIKE`` would need escaping and, on PostgreSQL, a special index).

    >>> prefix_range("acc1/")
    ('acc1/', 'acc10')
    """
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


class Clock(Protocol):
    def now_ms(self) -> int: ...


class SystemClock:
    """Wall-clock milliseconds since the epoch."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class Engine(ABC):
    """Queues, consumers and messages on one storage backend."""

    clock: Clock

    # -- catalog ------------------------------------------------------------------------------
    @abstractmethod
    def create_queue(self, name: str, settings: QueueSettings, shards: int = 1) -> QueueInfo:
        """Create a queue; ``QueueExists`` if the name is taken."""

    @abstractmethod
    def get_queue(self, name: str) -> QueueInfo:
        """The queue called ``name``; ``QueueNotFound`` if there is none."""

    @abstractmethod
    def get_queue_by_id(self, queue_id: str) -> QueueInfo:
        """The queue with id ``queue_id``; ``QueueNotFound`` if there is none."""

    def queue_settings(self, queue_id: str) -> QueueSettings:
        """The queue's settings as they are now, read on every send (and by dispatchers on every
        loop), so an engine should answer from something cheaper than a full catalog read when it
        can; ``QueueNotFound`` if there is none."""
        return self.get_queue_by_id(queue_id).settings

    @abstractmethod
    def list_queues(self, prefix: str = "") -> list[QueueInfo]:
        """Every queue whose name starts with ``prefix``, ordered by name; one whose storage is
        damaged is listed too, with its ``storage_error``. Only those queues are read (an account's
        view lists ``ACCOUNT/``: no other account's queue is looked at)."""

    # The catalog-only reads below serve views of many queues that show no queue's storage (the
    # dashboard): each is a constant number of statements however many queues there are, and no
    # storage is opened, so a damaged queue's ``storage_error`` may be None in them. The defaults go
    # through ``list_queues``; an engine with a catalog of its own answers them from it.
    def queue_names(self, prefix: str = "") -> list[str]:
        """The names of the queues whose names start with ``prefix``, ordered by name."""
        return [q.queue_name for q in self.list_queues(prefix)]

    def queues_named(self, names: Sequence[str]) -> list[QueueInfo]:
        """The queues of ``names`` that exist, by name (catalog entries: ``storage_error`` unchecked)."""
        wanted = set(names)
        return [q for q in self.list_queues() if q.queue_name in wanted]

    def dead_letter_sources(self, queue_name: str) -> list[str]:
        """The names of the queues whose consumer dead-letters into ``queue_name``, by name (a
        redrive's possible targets)."""
        return [q.queue_name for q in self.list_queues() if any(c.dead_letter_queue == queue_name for c in q.consumers)]

    @abstractmethod
    def update_queue(self, queue_id: str, settings: QueueSettings) -> QueueInfo:
        """Replace a queue's settings."""

    @abstractmethod
    def delete_queue(self, queue_id: str, *, force: bool = False) -> list[str]:
        """Delete a queue, its consumers and its messages.

        A queue whose storage is damaged is refused unless ``force``: then it is deleted and its
        damaged files are kept aside; returns where (paths relative to the deployment), else ``[]``.
        """

    @abstractmethod
    def add_consumer(
        self,
        queue_id: str,
        type: ConsumerType,
        script_name: str,
        settings: ConsumerSettings,
        dead_letter_queue: str,
    ) -> ConsumerInfo:
        """Register the queue's one consumer; ``ConsumerExists`` if it has one."""

    @abstractmethod
    def update_consumer(self, consumer_id: str, settings: ConsumerSettings, dead_letter_queue: str) -> ConsumerInfo:
        """Replace a consumer's settings."""

    @abstractmethod
    def remove_consumer(self, consumer_id: str) -> None:
        """Remove a consumer; ``ConsumerNotFound`` if there is none."""

    @abstractmethod
    def add_shard(self, queue_id: str) -> int:
        """Add a storage shard to a queue; returns the new shard count."""

    # -- messages -----------------------------------------------------------------------------
    @abstractmethod
    def enqueue(
        self, queue_id: str, messages: Sequence[NewMessage], *, urgent: bool = False, owed: bool = False
    ) -> SendBatchResult:
        """Store ``messages`` atomically and durably, all in one shard; returns the ids the engine
        gave them (in order) and the queue's metrics. ``urgent``: a wake-up that someone is waiting
        for (a fan-in's parent), stored ahead of the engine's other writes where they would make it
        queue (PostgreSQL: on a connection of its own), and this process's consumers of the queue
        woken at its commit (SQLite: before its flush; PostgreSQL: without waiting for the
        NOTIFY's trip through the server); as durable as any other send once this returns.

        ``owed``: the caller committed a record that it owes this send in the deployment's own
        database (the workflow store's owed wake-ups), sends it again while that record is there,
        and deletes the record only after this returns. PostgreSQL then commits the send without
        waiting for its WAL flush: its one WAL keeps commits in order, so a server crash that loses
        the send keeps the record too (the record's deletion comes later in the WAL), and the
        record is sent again. Elsewhere (SQLite's shards are files of their own) it changes nothing."""

    @abstractmethod
    def lease(
        self, queue_id: str, max_messages: int, visibility_ms: int, policy: DeliveryPolicy
    ) -> list[StoredMessage]:
        """Lease up to ``max_messages`` deliverable messages for ``visibility_ms``.

        ``attempts`` of each returned message counts this delivery. A message whose lease ran out
        after its last allowed delivery is dead-lettered by ``policy`` instead of returned.
        """

    @abstractmethod
    def extend(self, queue_id: str, lease_ids: Sequence[str], visibility_ms: int) -> None:
        """Keep leases alive for another ``visibility_ms`` (the heartbeat)."""

    @abstractmethod
    def settle(
        self,
        queue_id: str,
        acks: Sequence[str],
        retries: Sequence[tuple[str, int]],
        policy: DeliveryPolicy,
        *,
        durable: bool = True,
    ) -> SettleResult:
        """Ack (delete) and retry (make visible after a delay) leased messages in one commit.

        A retried message that has used up ``policy.max_deliveries`` goes to the dead letter queue
        (created if missing; id and timestamp kept, attempts back to 0 deliveries) or is dropped.
        Unknown or superseded lease ids give warnings and change nothing.

        ``durable=False``: the commit does not wait for its flush, for a consumer to which a
        delivery again is harmless (a workflow's internal queue: a message for an instance that is
        not due is acked without running anything). A crash may then lose it, which only delivers
        the messages again once their leases run out; it is never applied after a later durable
        write of the same shard. Over HTTP the server commits it durably.
        """

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
        """:meth:`settle`, and :meth:`lease` up to ``lease`` messages in the same transaction: a
        dispatcher whose finished batch frees room for the next takes it as it settles, one commit
        instead of two. An engine that cannot do both in one transaction (this default, a queue of
        several shards, HTTP) only settles and leases nothing: the dispatcher's own lease follows."""
        return self.settle(queue_id, acks, retries, policy, durable=durable), []

    @abstractmethod
    def release(self, queue_id: str, lease_ids: Sequence[str]) -> None:
        """Give leased, never-started messages back at once, without counting the delivery."""

    @abstractmethod
    def purge(self, queue_id: str) -> int:
        """Delete every stored message (in flight and delayed included); returns the count."""

    @abstractmethod
    def peek(self, queue_id: str, max_messages: int) -> list[StoredMessage]:
        """Read up to ``max_messages`` stored messages without leasing them."""

    @abstractmethod
    def metrics(self, queue_id: str) -> Metrics:
        """Backlog count and bytes, and the oldest stored message's timestamp (0 when empty)."""

    @abstractmethod
    def counters(self, queue_id: str) -> Counters:
        """Lifetime counters and the number of messages in flight."""

    def sent_count(self, queue_id: str) -> int:
        """:meth:`counters`' ``sent`` alone. The shard splitter samples it for every queue every few
        seconds, so an engine should read it without counting what is in flight (a walk over every
        leased and delayed message)."""
        return self.counters(queue_id).sent

    @abstractmethod
    def expire(self) -> dict[str, int]:
        """Delete messages older than their queue's retention; returns counts by queue id."""

    @abstractmethod
    def redrive(self, from_queue_id: str, to_queue_id: str) -> int:
        """Move every message of one queue to another (attempts reset); returns the count."""

    @abstractmethod
    def next_visible_ms(self, queue_id: str) -> int | None:
        """When the next message becomes deliverable (now or later); ``None`` when the queue is empty."""

    @abstractmethod
    def wait(self, queue_id: str, timeout: float) -> None:
        """Block until messages may have arrived on the queue, or ``timeout`` seconds pass."""

    # How long an idle consumer's :meth:`lease_waiting` waits at most: short for a local engine,
    # where it is a safety net for a missed wake-up; long over HTTP, where each wait is a request.
    idle_wait_seconds: float = 1.0
    # How often a consumer of a paused queue looks whether it was resumed (a request over HTTP).
    paused_poll_seconds: float = 0.2

    def lease_waiting(
        self, queue_id: str, max_messages: int, visibility_ms: int, policy: DeliveryPolicy, wait_seconds: float
    ) -> list[StoredMessage]:
        """:meth:`lease`; when nothing is deliverable, wait up to ``wait_seconds`` (less if a message
        becomes visible sooner) for messages to arrive. It may return nothing after its wait: the
        caller leases again. An engine that can lease as messages arrive does both in one call."""
        leased = self.lease(queue_id, max_messages, visibility_ms, policy)
        if leased or wait_seconds <= 0:
            return leased
        next_ms = self.next_visible_ms(queue_id)
        if next_ms is not None:
            wait_seconds = min(wait_seconds, max(0.0, (next_ms - self.clock.now_ms()) / 1000))
        if wait_seconds > 0:
            self.wait(queue_id, wait_seconds)
        return []

    def wake(self, queue_id: str) -> None:  # noqa: B027 - an engine whose waits are short may ignore it
        """Make this process's :meth:`wait` calls on the queue return now (a dispatcher stopping)."""

    def deployment_engine(self) -> Engine | None:
        """The engine this process's coordinator runs on: the engine itself, which sees the whole
        deployment; an account's view gives the engine it opened, or ``None`` if it shares one
        (the server's views: the server runs the coordinator)."""
        return self

    @abstractmethod
    def deployment(self) -> Deployment:
        """Where this engine's deployment keeps its state, so workflows, storage and the tools
        open their own stores beside the queues (:mod:`conveyor.deployment`)."""

    def acquire_leadership(self) -> bool:
        """Try (without blocking) to become the deployment's coordinator; True if this engine is."""
        return True

    def release_leadership(self) -> None:  # noqa: B027 - engines without leadership have nothing to give up
        """Give coordinator leadership up."""

    # -- the worker registry ------------------------------------------------------------------
    @abstractmethod
    def record_worker(self, entry: WorkerEntry, registered_by: str = "") -> None:
        """Register a worker process or renew its heartbeat (now, by this engine's clock), and
        forget dead ones. ``registered_by`` is the account whose token registered it ("" for the
        operator's own processes): an entry of another registrant is refused, not replaced."""

    @abstractmethod
    def remove_worker(self, worker_id: str, registered_by: str = "") -> None:
        """Forget a worker that stopped (nothing if there is none of ``registered_by``'s)."""

    @abstractmethod
    def list_workers(self) -> list[WorkerEntry]:
        """The live workers (heard of within the expiry), oldest first."""

    @abstractmethod
    def close(self) -> None:
        """Release every resource; the engine is unusable afterwards."""
