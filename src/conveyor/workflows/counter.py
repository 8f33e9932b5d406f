"""``conveyor.Counter``: a durable counter of an account, for fan-in (the seed's Durable Object
counter). A parent that waits for its children counts them up front, each child counts itself down
as it ends, and the counter sends the parent an event when it reaches zero.

>>> done = cv.counter("build-42")
>>> done.add(3)
3
>>> done.notify_at_zero("build", "build-42", "children-done")
>>> done.add(-1, key="child-1")      # an add with a key is applied once, however often it is retried
2

Every change is one transaction of the workflow store. When a change leaves the counter at zero,
each notice not yet sent is sent in that transaction — its event buffered for the instance, a
wake-up message recorded as owed — so a process that dies right after loses nothing: the
coordinator's ``workflow-wakeups`` service sends wake-ups left owed for ``GRACE_SECONDS``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from typing import TYPE_CHECKING

from conveyor.engine.accounts import AccountEngine
from conveyor.engine.base import Engine
from conveyor.errors import InvalidRequest, QueueNotFound
from conveyor.workflows.client import check_instance_id, check_workflow_name, workflow_store
from conveyor.workflows.execution import ensure_queue, send_wake
from conveyor.workflows.model import CounterChange
from conveyor.workflows.store import WorkflowStore

if TYPE_CHECKING:
    from conveyor.client.sync import Conveyor

log = logging.getLogger("conveyor.workflows")

COUNTER_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,199}\Z")
MAX_KEY_CHARS = 200
MAX_EVENT_TYPE_CHARS = 100
MAX_ADD = 2**53
SERVICE = "workflow-wakeups"
INTERVAL_SECONDS = 5.0
# A wake-up owed this long was not sent by the process that owed it (it sends at once).
GRACE_SECONDS = 10.0
BATCH = 500


def check_counter_name(name: object) -> str:
    if not isinstance(name, str) or not COUNTER_NAME.match(name):
        raise InvalidRequest(
            f"invalid counter name {name!r}: use 1 to 200 letters, digits, '_', '-', '.' and ':', "
            "not starting with '-', '.' or ':'"
        )
    return name


def check_add(n: object, key: object) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or abs(n) > MAX_ADD:
        raise InvalidRequest(f"a counter adds a whole number from -2^53 to 2^53, not {n!r}")
    if key is not None and (not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_CHARS):
        raise InvalidRequest(f"an add's key is 1 to {MAX_KEY_CHARS} characters, not {key!r}")


def check_event_type(event_type: object) -> str:
    if not isinstance(event_type, str) or not 1 <= len(event_type) <= MAX_EVENT_TYPE_CHARS:
        raise InvalidRequest(f"event type {event_type!r} is invalid: use 1 to {MAX_EVENT_TYPE_CHARS} characters")
    return event_type


class Counter:
    """A counter of the client's account (``cv.counter(name)``): a whole number, 0 until added to.

    - :meth:`add` changes it atomically and returns the new value;
    - :meth:`notify_at_zero` sends an instance an event once, when the counter is zero;
    - :meth:`value` reads it, :meth:`delete` removes it with its notices.
    """

    def __init__(self, client: Conveyor, name: str) -> None:
        self.name = check_counter_name(name)
        self._client = client
        self._store = workflow_store(client)
        self._account = client.deployment.account

    def __repr__(self) -> str:
        return f"<Counter {self.name}>"

    def add(self, n: int = 1, *, key: str | None = None) -> int:
        """Add ``n`` (negative to count down) and return the new value. With ``key``, the add is
        applied once: a retried step that adds with the same key gets the current value and adds
        nothing. Reaching zero sends the notices (:meth:`notify_at_zero`)."""
        check_add(n, key)
        change = self._store.counter_add(self._account, self.name, n, key, self._now())
        self._deliver(change)
        return change.value

    def value(self) -> int:
        """The value now."""
        return self._store.counter_value(self._account, self.name)

    def notify_at_zero(self, workflow: str, instance_id: str, event_type: str) -> None:
        """Send the instance ``instance_id`` of ``workflow`` the event ``event_type`` (payload
        ``{"counter": name, "value": 0}``) once, when this counter is zero: at once if it is zero
        now (so count up before registering), else when an add brings it there. The event waits
        for the instance's ``step.wait_for_event(..., type=event_type)`` like any other. Calling it
        again with the same arguments changes nothing; ``InstanceNotFound`` if there is no such
        instance."""
        check_workflow_name(workflow)
        check_instance_id(instance_id)
        check_event_type(event_type)
        change = self._store.counter_notify(self._account, self.name, workflow, instance_id, event_type, self._now())
        self._deliver(change)

    def delete(self) -> bool:
        """Delete the counter, its add keys and its notices (unsent ones are never sent); False
        if there was nothing to delete."""
        return self._store.counter_delete(self._account, self.name)

    def _now(self) -> int:
        return self._client.engine.clock.now_ms()

    def _deliver(self, change: CounterChange) -> None:
        if not change.wakeups:
            return
        engine = self._client.engine
        queues = self._client.component(QUEUE_IDS, QueueIds.open)
        for wakeup in change.wakeups:
            # Urgent: the parent waits, and this send would otherwise queue behind its children's acks.
            # Owed: the store recorded it, and forgets it (wakeups_sent) only once this returned.
            try:
                queue_id = queues.get(self._store, self._account, wakeup.workflow, engine)
                send_wake(engine, queue_id, wakeup.instance, None, urgent=True, owed=True)
            except QueueNotFound:  # the workflow was deleted and made again since: look it up anew
                queues.forget(self._account, wakeup.workflow)
                queue_id = queues.get(self._store, self._account, wakeup.workflow, engine)
                send_wake(engine, queue_id, wakeup.instance, None, urgent=True, owed=True)
        self._store.wakeups_sent(self._account, [w.seq for w in change.wakeups])


QUEUE_IDS = "workflow-queue-ids"


class QueueIds:
    """The ids of the workflows' internal queues a client's counters have woken (a client
    component): the wake that ends a fan-in costs no catalog lookup."""

    def __init__(self) -> None:
        self._ids: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    @classmethod
    def open(cls, deployment: object, clock: object) -> QueueIds:
        return cls()

    def get(self, store: WorkflowStore, account: str, workflow: str, engine: Engine) -> str:
        with self._lock:
            found = self._ids.get((account, workflow))
        if found is None:
            found = store.internal_queue(account, workflow, engine)
            with self._lock:
                self._ids[(account, workflow)] = found
        return found

    def remember(self, account: str, workflow: str, queue_id: str) -> None:
        """Note a queue id learned elsewhere (a worker registering the workflow)."""
        with self._lock:
            self._ids[(account, workflow)] = queue_id

    def forget(self, account: str, workflow: str) -> None:
        with self._lock:
            self._ids.pop((account, workflow), None)

    def close(self) -> None:
        pass


class AsyncCounter:
    """The asyncio twin of :class:`Counter` (``await acv.counter(name)``): the same methods,
    awaitable."""

    def __init__(self, counter: Counter) -> None:
        self.sync = counter

    @property
    def name(self) -> str:
        return self.sync.name

    async def add(self, n: int = 1, *, key: str | None = None) -> int:
        return await asyncio.to_thread(self.sync.add, n, key=key)

    async def value(self) -> int:
        return await asyncio.to_thread(self.sync.value)

    async def notify_at_zero(self, workflow: str, instance_id: str, event_type: str) -> None:
        await asyncio.to_thread(self.sync.notify_at_zero, workflow, instance_id, event_type)

    async def delete(self) -> bool:
        return await asyncio.to_thread(self.sync.delete)


def send_owed_wakeups(store: WorkflowStore, engine: Engine) -> int:
    """The coordinator's ``workflow-wakeups`` round: send the wake-ups owed for longer than
    ``GRACE_SECONDS`` (their writer died first); ``engine`` is the deployment's raw engine.
    Returns how many it sent."""
    owed = store.owed_wakeups(engine.clock.now_ms() - round(GRACE_SECONDS * 1000), BATCH)
    queues: dict[tuple[str, str], str] = {}
    for wakeup in owed:
        where = (wakeup.account, wakeup.workflow)
        if where not in queues:
            view = AccountEngine(engine, wakeup.account) if wakeup.account else engine
            queues[where] = ensure_queue(view, wakeup.workflow)
        send_wake(engine, queues[where], wakeup.instance, None)
        store.wakeups_sent(wakeup.account, [wakeup.seq])
    if owed:
        log.warning("workflow wake-ups: sent %d that a process died before sending", len(owed))
    return len(owed)
