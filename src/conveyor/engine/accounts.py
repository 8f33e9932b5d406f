"""Accounts: every account sees its own queues, and nothing of any other account's.

The storage engines know nothing of accounts. An account's queue ``emails`` is stored under the
qualified name ``ACCOUNT/emails``: queue names cannot hold ``/``, so no name one account can choose
reaches another account's queues, and two accounts may both have an ``emails``. :class:`AccountEngine` wraps
an engine for one account: it qualifies names on the way in, strips them on the way out, and answers
``QueueNotFound`` for a queue id of another account, exactly as for an id that does not exist.

Because it is an :class:`~conveyor.engine.base.Engine`, ``Conveyor(AccountEngine(engine, acc))``
is the same client code, with the same checks, everywhere: ``conveyor.connect("sqlite:///...")``
opens the directory's engine and views it as account ``local`` (or ``account_id=``), and the HTTP
server views its one engine as each request's account. Deployment-wide duties (the coordinator's
retention expiry and shard splits, the server itself) use the raw engine
(:func:`conveyor.client.connect.open_engine`), which sees every account.

>>> view = AccountEngine(open_engine("sqlite:///var/lib/conveyor"), "local", owns_engine=True)
>>> view.create_queue("emails", QueueSettings()).queue_name      # stored as 'local/emails'
'emails'
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from conveyor.deployment import Deployment
from conveyor.engine.base import Clock, Engine
from conveyor.errors import ConsumerNotFound, ConveyorError, InvalidRequest, QueueNotFound
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

# \Z, not $: "$" also matches before a final newline, which would let "acc1\n" through.
ACCOUNT_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}\Z")
SEPARATOR = "/"
# Where embedded use (connect("sqlite://..."), connect("postgresql://..."), the CLI) works unless
# told otherwise, and where queues made before accounts existed were moved by the upgrade.
LOCAL_ACCOUNT = "local"
# Queues whose names hold this mark belong to Conveyor's parts (a workflow's internal queue,
# ``workflow~NAME``): no name an account chooses can hold it, and an account's listing leaves them out.
INTERNAL_MARK = "~"


def check_account_id(account_id: str) -> str:
    if not ACCOUNT_ID_PATTERN.match(account_id):
        raise InvalidRequest(
            f"invalid account id {account_id!r}: use 1 to 64 letters, digits, '_' and '-', starting with a letter "
            "or digit"
        )
    return account_id


def qualify(account_id: str, name: str) -> str:
    """The engine-level name of an account's queue."""
    return f"{account_id}{SEPARATOR}{name}"


def split(qualified: str) -> tuple[str, str]:
    """``(account_id, queue name)`` of an engine-level name; account ``""`` for a plain name (the
    raw engine's own, which opening a deployment made before accounts moves into ``local``)."""
    account, sep, name = qualified.rpartition(SEPARATOR)
    return (account, name) if sep else ("", qualified)


F = TypeVar("F", bound=Callable[..., Any])


def _unqualified_errors(method: F) -> F:
    """Refusals name queues as the account knows them: ``'emails'``, never ``'acc1/emails'``."""

    @functools.wraps(method)
    def wrapped(self: AccountEngine, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except ConveyorError as exc:
            if self._prefix not in exc.message:
                raise
            raise self._unqualified(exc) from None

    return wrapped  # type: ignore[return-value]


class AccountEngine(Engine):
    """One account's view of an engine (see the module docstring).

    ``owns_engine``: this view opened ``engine`` for its process (``conveyor.connect``), so it
    closes it and lets the process take its turn as the deployment's coordinator; the server's
    views share its engine and do neither.
    """

    def __init__(self, engine: Engine, account_id: str, *, owns_engine: bool = False) -> None:
        self.inner = engine
        self.account_id = check_account_id(account_id)
        self.owns_engine = owns_engine
        self._prefix = account_id + SEPARATOR
        self._owned: set[str] = set()

    @property
    def clock(self) -> Clock:
        return self.inner.clock

    @clock.setter
    def clock(self, value: Clock) -> None:
        self.inner.clock = value

    # -- names --------------------------------------------------------------------------------
    def _qualify(self, name: str) -> str:
        return self._prefix + name

    def _mine(self, qualified: str) -> bool:
        return qualified.startswith(self._prefix)

    def _strip(self, name: str) -> str:
        return name[len(self._prefix) :] if self._mine(name) else name

    def _consumer(self, info: ConsumerInfo) -> ConsumerInfo:
        return dataclasses.replace(
            info, queue_name=self._strip(info.queue_name), dead_letter_queue=self._strip(info.dead_letter_queue)
        )

    def _queue(self, info: QueueInfo) -> QueueInfo:
        # Built directly, not by dataclasses.replace: an account's listing makes one a queue.
        return QueueInfo(
            info.queue_id,
            self._strip(info.queue_name),
            info.created_on,
            info.modified_on,
            info.settings,
            tuple(self._consumer(c) for c in info.consumers) if info.consumers else (),
            info.shards,
            info.storage_error,
        )

    def _dlq(self, name: str) -> str:
        return self._qualify(name) if name else ""

    def _policy(self, policy: DeliveryPolicy) -> DeliveryPolicy:
        if policy.dead_letter_queue is None:
            return policy
        return dataclasses.replace(policy, dead_letter_queue=self._qualify(policy.dead_letter_queue))

    def _unqualified(self, exc: ConveyorError) -> ConveyorError:
        return type(exc)(exc.message.replace(self._prefix, ""))

    def _own(self, queue_id: str) -> str:
        """``queue_id`` if it is this account's queue; ``QueueNotFound`` otherwise."""
        if queue_id not in self._owned:
            info = self.inner.get_queue_by_id(queue_id)
            if not self._mine(info.queue_name):
                raise QueueNotFound(f"queue {queue_id!r} does not exist")
            # Queue ids are random and never reused, so a positive answer can be kept.
            self._owned.add(queue_id)
        return queue_id

    # -- catalog ------------------------------------------------------------------------------
    @_unqualified_errors
    def create_queue(self, name: str, settings: QueueSettings, shards: int = 1) -> QueueInfo:
        return self._queue(self.inner.create_queue(self._qualify(name), settings, shards))

    @_unqualified_errors
    def get_queue(self, name: str) -> QueueInfo:
        try:
            return self._queue(self.inner.get_queue(self._qualify(name)))
        except QueueNotFound:
            raise QueueNotFound(f"queue {name!r} does not exist") from None

    @_unqualified_errors
    def get_queue_by_id(self, queue_id: str) -> QueueInfo:
        info = self.inner.get_queue_by_id(queue_id)
        if not self._mine(info.queue_name):
            raise QueueNotFound(f"queue {queue_id!r} does not exist")
        return self._queue(info)

    @_unqualified_errors
    def queue_settings(self, queue_id: str) -> QueueSettings:
        # The inner engine's (SQLite: the shared-memory snapshot), not the default's catalog read.
        return self.inner.queue_settings(self._own(queue_id))

    @_unqualified_errors
    def list_queues(self, prefix: str = "") -> list[QueueInfo]:
        listed = [self._queue(q) for q in self.inner.list_queues(self._qualify(prefix))]
        return [q for q in listed if INTERNAL_MARK not in q.queue_name]

    @_unqualified_errors
    def queue_names(self, prefix: str = "") -> list[str]:
        cut = len(self._prefix)
        return [n[cut:] for n in self.inner.queue_names(self._qualify(prefix)) if INTERNAL_MARK not in n]

    @_unqualified_errors
    def queues_named(self, names: Sequence[str]) -> list[QueueInfo]:
        found = self.inner.queues_named([self._qualify(n) for n in names if INTERNAL_MARK not in n])
        return [self._queue(q) for q in found if self._mine(q.queue_name)]

    @_unqualified_errors
    def dead_letter_sources(self, queue_name: str) -> list[str]:
        sources = self.inner.dead_letter_sources(self._qualify(queue_name))
        return [self._strip(s) for s in sources if self._mine(s) and INTERNAL_MARK not in s]

    @_unqualified_errors
    def update_queue(self, queue_id: str, settings: QueueSettings) -> QueueInfo:
        return self._queue(self.inner.update_queue(self._own(queue_id), settings))

    @_unqualified_errors
    def delete_queue(self, queue_id: str, *, force: bool = False) -> list[str]:
        kept_aside = self.inner.delete_queue(self._own(queue_id), force=force)
        self._owned.discard(queue_id)
        return kept_aside

    @_unqualified_errors
    def add_consumer(
        self,
        queue_id: str,
        type: ConsumerType,
        script_name: str,
        settings: ConsumerSettings,
        dead_letter_queue: str,
    ) -> ConsumerInfo:
        info = self.inner.add_consumer(self._own(queue_id), type, script_name, settings, self._dlq(dead_letter_queue))
        return self._consumer(info)

    @_unqualified_errors
    def update_consumer(self, consumer_id: str, settings: ConsumerSettings, dead_letter_queue: str) -> ConsumerInfo:
        self._own_consumer_or_fail(consumer_id)
        return self._consumer(self.inner.update_consumer(consumer_id, settings, self._dlq(dead_letter_queue)))

    @_unqualified_errors
    def remove_consumer(self, consumer_id: str) -> None:
        self._own_consumer_or_fail(consumer_id)
        self.inner.remove_consumer(consumer_id)

    def _own_consumer_or_fail(self, consumer_id: str) -> None:
        owned = self.inner.list_queues(self._qualify(""))
        if not any(c.consumer_id == consumer_id for q in owned for c in q.consumers):
            raise ConsumerNotFound(f"consumer {consumer_id!r} does not exist")

    @_unqualified_errors
    def add_shard(self, queue_id: str) -> int:
        return self.inner.add_shard(self._own(queue_id))

    # -- messages -----------------------------------------------------------------------------
    def enqueue(
        self, queue_id: str, messages: Sequence[NewMessage], *, urgent: bool = False, owed: bool = False
    ) -> SendBatchResult:
        # The send path: the decorator's work written out (its call and argument packing were
        # most of this layer's cost per send), and the ownership check a set lookup.
        if queue_id not in self._owned:
            self._own(queue_id)
        try:
            return self.inner.enqueue(queue_id, messages, urgent=urgent, owed=owed)
        except ConveyorError as exc:
            if self._prefix not in exc.message:
                raise
            raise self._unqualified(exc) from None

    @_unqualified_errors
    def lease(
        self, queue_id: str, max_messages: int, visibility_ms: int, policy: DeliveryPolicy
    ) -> list[StoredMessage]:
        return self.inner.lease(self._own(queue_id), max_messages, visibility_ms, self._policy(policy))

    @_unqualified_errors
    def extend(self, queue_id: str, lease_ids: Sequence[str], visibility_ms: int) -> None:
        self.inner.extend(self._own(queue_id), lease_ids, visibility_ms)

    @_unqualified_errors
    def settle(
        self,
        queue_id: str,
        acks: Sequence[str],
        retries: Sequence[tuple[str, int]],
        policy: DeliveryPolicy,
        *,
        durable: bool = True,
    ) -> SettleResult:
        return self.inner.settle(self._own(queue_id), acks, retries, self._policy(policy), durable=durable)

    @_unqualified_errors
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
        own, checked = self._own(queue_id), self._policy(policy)
        return self.inner.settle_and_lease(own, acks, retries, checked, lease, visibility_ms, durable=durable)

    @_unqualified_errors
    def release(self, queue_id: str, lease_ids: Sequence[str]) -> None:
        self.inner.release(self._own(queue_id), lease_ids)

    @_unqualified_errors
    def purge(self, queue_id: str) -> int:
        return self.inner.purge(self._own(queue_id))

    @_unqualified_errors
    def peek(self, queue_id: str, max_messages: int) -> list[StoredMessage]:
        return self.inner.peek(self._own(queue_id), max_messages)

    @_unqualified_errors
    def metrics(self, queue_id: str) -> Metrics:
        return self.inner.metrics(self._own(queue_id))

    @_unqualified_errors
    def counters(self, queue_id: str) -> Counters:
        return self.inner.counters(self._own(queue_id))

    def sent_count(self, queue_id: str) -> int:
        return self.inner.sent_count(self._own(queue_id))

    def expire(self) -> dict[str, int]:
        # Retention is the deployment's coordinator's job, not one account's: an embedded
        # process's own view may run it (it owns the engine), a server's account views may not.
        return self.inner.expire() if self.owns_engine else {}

    @_unqualified_errors
    def redrive(self, from_queue_id: str, to_queue_id: str) -> int:
        return self.inner.redrive(self._own(from_queue_id), self._own(to_queue_id))

    @_unqualified_errors
    def next_visible_ms(self, queue_id: str) -> int | None:
        return self.inner.next_visible_ms(self._own(queue_id))

    @_unqualified_errors
    def wait(self, queue_id: str, timeout: float) -> None:
        self.inner.wait(self._own(queue_id), timeout)

    def wake(self, queue_id: str) -> None:
        self.inner.wake(queue_id)

    def deployment_engine(self) -> Engine | None:
        return self.inner if self.owns_engine else None

    def deployment(self) -> Deployment:
        return self.inner.deployment().for_account(self.account_id)

    def acquire_leadership(self) -> bool:
        return self.owns_engine and self.inner.acquire_leadership()

    def release_leadership(self) -> None:
        if self.owns_engine:
            self.inner.release_leadership()

    # -- the worker registry ------------------------------------------------------------------
    @_unqualified_errors
    def record_worker(self, entry: WorkerEntry, registered_by: str = "") -> None:
        """Record a worker of this account: every queue it runs must be the account's, and is
        named as the catalog names it (not as the worker says)."""
        runs = tuple(
            dataclasses.replace(run, queue_name=self.inner.get_queue_by_id(self._own(run.queue_id)).queue_name)
            for run in entry.runs
        )
        self.inner.record_worker(dataclasses.replace(entry, runs=runs), self.account_id)

    def remove_worker(self, worker_id: str, registered_by: str = "") -> None:
        self.inner.remove_worker(worker_id, self.account_id)

    def list_workers(self) -> list[WorkerEntry]:
        """The workers that run this account's queues, each with those runs only."""
        visible = []
        for entry in self.inner.list_workers():
            runs = tuple(
                dataclasses.replace(run, queue_name=self._strip(run.queue_name))
                for run in entry.runs
                if self._mine(run.queue_name)
            )
            if runs:
                visible.append(dataclasses.replace(entry, runs=runs))
        return visible

    def close(self) -> None:
        """Closes the engine this view opened; a shared engine outlives any one account's view."""
        if self.owns_engine:
            self.inner.close()
