"""What every request handler needs: the engine, the authenticator, and one request's context."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

import anyio.to_thread
from starlette.requests import Request

from conveyor import limits
from conveyor.client.backpressure import QueueLimits
from conveyor.client.limited_engine import LimitedEngine
from conveyor.client.sync import INFO_SECONDS, Conveyor, Queue
from conveyor.deployment import Deployment
from conveyor.engine.base import Clock, Engine
from conveyor.engine.history import HistoryStore, open_history
from conveyor.errors import InvalidQueueId, QueueNotFound
from conveyor.model import QueueInfo
from conveyor.server.accounts import AccountEngine, check_account_id
from conveyor.server.auth import Authenticator, Principal
from conveyor.server.lease_holds import LeaseHolds
from conveyor.server.prometheus import ConcurrencySource, RequestMetrics

T = TypeVar("T")


class Closes(Protocol):
    def close(self) -> None: ...


S = TypeVar("S", bound=Closes)


async def blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking engine call on the thread pool, so the event loop keeps serving others."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


class EngineClock:
    """The engine's clock as it is at each call (a test may swap ``engine.clock``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def now_ms(self) -> int:
        return self._engine.clock.now_ms()


@dataclass
class Service:
    """The state shared by every request of one server."""

    engine: Engine
    auth: Authenticator
    requests: RequestMetrics = field(default_factory=RequestMetrics)
    concurrency: ConcurrencySource | None = None
    # Purge start times (ms) by queue id, for GET .../purge.
    purges: dict[str, int] = field(default_factory=dict)
    _accounts: dict[str, Conveyor] = field(default_factory=dict)
    _stores: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # (account, queue id) -> a handle on the queue, for the routes that send, pull, ack and peek:
    # they run per message batch, and read the queue (its name, delay, pause flag and consumer) from
    # a handle at most INFO_SECONDS old. A route declared a catalog write (access.CATALOG_WRITE)
    # drops its queue's handle once it has answered, so a change made here applies at once.
    handles: dict[tuple[str, str], Queue] = field(default_factory=dict)
    # Idle remote workers' long-polled leases (engine_routes.lease).
    holds: LeaseHolds = field(init=False)
    # Sends past a queue's rate, backlog or size are refused (10250, 10251); none by default.
    queue_limits: QueueLimits | None = None
    # What the accounts' views send through: the engine, behind the limits' gate when there are any.
    sends: Engine = field(init=False)

    def __post_init__(self) -> None:
        self.holds = LeaseHolds(self.engine)
        limits = self.queue_limits
        self.sends = LimitedEngine(self.engine, limits) if limits is not None and limits.active else self.engine

    def client(self, account_id: str) -> Conveyor:
        """The account's view of the deployment, with the embedded API's own checks."""
        with self._lock:
            client = self._accounts.get(account_id)
            if client is None:
                client = Conveyor(AccountEngine(self.sends, check_account_id(account_id)))
                self._accounts[account_id] = client
            return client

    def store(self, key: str, open: Callable[[Deployment, Clock], S]) -> S:
        """The server's store of a part beside the queues (KV, ...), opened once, for every account
        (the raw deployment, account ``""``), reading time from the engine's clock as it is now."""
        with self._lock:
            if key not in self._stores:
                self._stores[key] = open(self.engine.deployment(), EngineClock(self.engine))
            return cast(S, self._stores[key])

    def history(self) -> HistoryStore:
        """The deployment's queue history (:mod:`conveyor.engine.history`), opened once."""
        return self.store("history", lambda deployment, clock: open_history(deployment))

    def close_stores(self) -> None:
        with self._lock:
            opened, self._stores = list(self._stores.values()), {}
        for store in reversed(opened):
            store.close()

    def forget(self, account_id: str, queue_id: str) -> None:
        """Drop the handle on one queue, whose settings or consumer just changed."""
        self.handles.pop((account_id, queue_id), None)


@dataclass(frozen=True, slots=True)
class Context:
    """One request's caller and its account's client."""

    principal: Principal
    client: Conveyor
    service: Service
    account_id: str

    def lookup_sync(self, queue_id: str) -> tuple[Queue, QueueInfo]:
        """The caller's queue ``queue_id``: 10107 for a malformed id, 404 if it is not theirs to see."""
        if not limits.ID_PATTERN.match(queue_id):
            raise InvalidQueueId(f"queue id {queue_id!r} is malformed: expected 32 lowercase hex characters")
        info = self.client.engine.get_queue_by_id(queue_id)
        self.principal.check_queue_id(queue_id, info.queue_name)
        return Queue(self.client, info), info

    def message_lookup_sync(self, queue_id: str) -> tuple[Queue, QueueInfo]:
        """:meth:`lookup_sync` for the message routes: the queue as read at most INFO_SECONDS ago."""
        key = (self.account_id, queue_id)
        queue = self.service.handles.get(key)
        if queue is None:
            queue, info = self.lookup_sync(queue_id)
            self.service.handles[key] = queue
            return queue, info
        try:
            info = queue.info(max_age=INFO_SECONDS)
        except QueueNotFound:  # deleted elsewhere (another server, the CLI): keep nothing of it
            self.service.forget(self.account_id, queue_id)
            raise
        self.principal.check_queue_id(queue_id, info.queue_name)
        return queue, info

    async def lookup(self, queue_id: str) -> tuple[Queue, QueueInfo]:
        return await blocking(self.lookup_sync, queue_id)

    async def queue(self, queue_id: str) -> Queue:
        return (await self.lookup(queue_id))[0]


def context(request: Request) -> Context:
    """The context of a request that :func:`conveyor.server.access.admit` let through."""
    ctx: Context | None = getattr(request.state, "context", None)
    if ctx is None:
        raise RuntimeError(f"{request.method} {request.url.path} was not admitted: its route declares no access")
    return ctx
