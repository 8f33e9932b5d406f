"""The remote transport: :class:`RemoteEngine` implements the engine interface over HTTP, so
``conveyor.connect("http://host:8787", token=..., account_id=...)`` is the same API as the embedded
one, and ``App`` workers consume over HTTP (leases, heartbeats and settles through Conveyor's
``/conveyor/v1`` endpoints; queues and consumers through Cloudflare's ``/client/v4`` API).

>>> cv = conveyor.connect("http://127.0.0.1:8787", token="cvt_...", account_id="acc1")
>>> cv.create_queue("emails").send({"to": "a@b"})
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from conveyor import errors, wire
from conveyor.deployment import Deployment
from conveyor.engine.base import Engine, SystemClock
from conveyor.errors import ConsumerNotFound, ConveyorError, QueueNotFound
from conveyor.ids import new_id
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

T = TypeVar("T")

# The server answers a wait after at most this long; longer waits are made of several.
MAX_WAIT_SECONDS = 5.0
# An idle consumer's lease is held by the server until messages arrive or this passes: one request
# per this long while nothing happens. It stays under the server's idle-connection timeout (30 s)
# and under this client's read timeout.
LONG_POLL_SECONDS = 20.0
_JSON = {"content-type": "application/json"}
_BY_STATUS: dict[int, type[ConveyorError]] = {
    401: errors.Unauthorized,
    403: errors.Forbidden,
    404: errors.QueueNotFound,
    409: errors.ConsumerExists,
    413: errors.MessageTooLarge,
    429: errors.Overloaded,
}


def error_from(
    response: httpx.Response,
    *modules: ModuleType,
    by_status: Mapping[int, type[ConveyorError]] = _BY_STATUS,
) -> ConveyorError:
    """The ConveyorError a refusal stands for: the class the server names (``conveyor-error``),
    looked up in ``modules`` (a part's own errors) and then :mod:`conveyor.errors`, and only among
    ConveyorError classes; else by HTTP status (``by_status``)."""
    try:
        message = msgspec.json.decode(response.content, type=wire.ErrorEnvelope).errors[0].message
    except (msgspec.DecodeError, IndexError):
        message = response.text or response.reason_phrase
    name = response.headers.get("conveyor-error", "")
    named = (getattr(module, name, None) for module in (*modules, errors))
    cls = next((c for c in named if isinstance(c, type) and issubclass(c, ConveyorError)), None)
    if cls is None:
        cls = by_status.get(response.status_code)
        if cls is None:
            cls = errors.InvalidRequest if response.status_code < 500 else ConveyorError
    retry_after = response.headers.get("retry-after", "")
    return cls(message, retry_after=float(retry_after) if retry_after.isdigit() else None)


class RouteClient:
    """A client of one family of a server's account routes (a tool's: ``/slurper``, ``/prober/fleets``):
    :meth:`call` returns a route's ``result`` decoded as ``kind``, or raises the error the server
    refused with, found in ``modules`` (see :func:`error_from`).

    >>> routes = RouteClient(cv.deployment, "/slurper", slurper_errors)
    >>> routes.call(shapes.SlurperJob, "GET", "/jobs/" + job_id)
    """

    def __init__(
        self,
        deployment: Deployment,
        path: str,
        *modules: ModuleType,
        by_status: Mapping[int, type[ConveyorError]] = _BY_STATUS,
        timeout: float = 120.0,
    ) -> None:
        headers = {"authorization": f"Bearer {deployment.token}"} if deployment.token else {}
        self._http = httpx.Client(base_url=deployment.location.rstrip("/"), headers=headers, timeout=timeout)
        self.base = f"/client/v4/accounts/{quote(deployment.account, safe='')}{path}"
        self._modules = modules
        self._by_status = by_status

    def close(self) -> None:
        self._http.close()

    def call(self, kind: Any, method: str, path: str, body: Any = None, params: Mapping[str, Any] | None = None) -> Any:
        """The ``result`` of one route's answer, or the error the server refused with."""
        try:
            response = self._http.request(method, self.base + path, json=body, params=params)
        except httpx.TransportError as exc:
            raise ConveyorError(f"cannot reach the Conveyor server: {exc}") from exc
        if response.status_code >= 400:
            raise error_from(response, *self._modules, by_status=self._by_status)
        return wire.decode_answer(response.content, wire.Envelope[kind]).result


class RemoteEngine(Engine):
    """An engine on the far side of ``conveyor serve`` (see the module docstring)."""

    def __init__(self, url: str, *, token: str | None, account_id: str, timeout: float = 30.0) -> None:
        if not account_id:
            raise errors.InvalidRequest("connecting over HTTP needs an account_id")
        self.clock = SystemClock()
        self.account_id = account_id
        self._base_url = url.rstrip("/")
        self._token = token
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(max(timeout, LONG_POLL_SECONDS + 10), connect=10.0),
            limits=httpx.Limits(max_connections=300, max_keepalive_connections=300),
        )
        self._cf = f"/client/v4/accounts/{account_id}/queues"
        self._cv = f"/conveyor/v1/accounts/{account_id}/queues"
        self._workers = f"/conveyor/v1/accounts/{account_id}/workers"
        self._consumer_queue: dict[str, str] = {}
        self._lock = threading.Lock()
        # Names this client's held leases, so wake() ends only them: queue id -> leases in flight.
        self._waiter = new_id()
        self._holding: dict[str, int] = {}
        self._woken: set[str] = set()

    # -- plumbing -----------------------------------------------------------------------------
    def _call(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> bytes:
        content = None if body is None else wire.encode(body)
        headers = None if body is None else _JSON
        try:
            response = self._http.request(method, path, content=content, headers=headers, params=params)
        except httpx.TransportError as exc:
            raise ConveyorError(f"cannot reach the Conveyor server: {exc}") from exc
        if response.status_code >= 400:
            raise error_from(response)
        return response.content

    def _answer(
        self, kind: type[T], method: str, path: str, body: Any = None, params: dict[str, Any] | None = None
    ) -> wire.Envelope[T]:
        """The server's answer, decoded into the wire's envelope around ``kind``."""
        return wire.decode_answer(self._call(method, path, body, params), wire.Envelope[kind])  # type: ignore[valid-type]

    def _result(self, kind: type[T], method: str, path: str, body: Any = None) -> T:
        return self._answer(kind, method, path, body).result

    def _remember(self, info: QueueInfo) -> QueueInfo:
        with self._lock:
            for c in info.consumers:
                self._consumer_queue[c.consumer_id] = info.queue_id
        return info

    def _queue_of_consumer(self, consumer_id: str) -> str:
        with self._lock:
            known = self._consumer_queue.get(consumer_id)
        if known is not None:
            return known
        for queue in self.list_queues():
            if any(c.consumer_id == consumer_id for c in queue.consumers):
                return queue.queue_id
        raise ConsumerNotFound(f"consumer {consumer_id!r} does not exist")

    # -- catalog ------------------------------------------------------------------------------
    def create_queue(self, name: str, settings: QueueSettings, shards: int = 1) -> QueueInfo:
        info = self._result(wire.Queue, "POST", self._cf, wire.queue_request(name, settings)).to_model()
        for _ in range(shards - 1):
            self.add_shard(info.queue_id)
        return self.get_queue_by_id(info.queue_id) if shards > 1 else self._remember(info)

    def get_queue(self, name: str) -> QueueInfo:
        found = self._answer(list[wire.Queue], "GET", self._cf, params={"name": name}).result
        if not found:
            raise QueueNotFound(f"queue {name!r} does not exist")
        return self._remember(found[0].to_model())

    def get_queue_by_id(self, queue_id: str) -> QueueInfo:
        return self._remember(self._result(wire.Queue, "GET", f"{self._cf}/{queue_id}").to_model())

    def list_queues(self, prefix: str = "") -> list[QueueInfo]:
        """The account's queues (the server lists one account's only); ``prefix`` is matched here."""
        out: list[QueueInfo] = []
        page = 1
        while True:
            answer = self._answer(list[wire.Queue], "GET", self._cf, params={"page": page, "per_page": 1000})
            out.extend(self._remember(q.to_model()) for q in answer.result if q.queue_name.startswith(prefix))
            if answer.result_info is msgspec.UNSET or page >= answer.result_info.total_pages:
                return out
            page += 1

    def update_queue(self, queue_id: str, settings: QueueSettings) -> QueueInfo:
        body = wire.queue_request(None, settings)
        return self._remember(self._result(wire.Queue, "PUT", f"{self._cf}/{queue_id}", body).to_model())

    def delete_queue(self, queue_id: str, *, force: bool = False) -> list[str]:
        if not force:
            self._result(type(None), "DELETE", f"{self._cf}/{queue_id}")
            return []
        answer = self._answer(wire.KeptAside, "DELETE", f"{self._cf}/{queue_id}", params={"force": "true"})
        return list(answer.result.kept_aside)

    def add_consumer(
        self,
        queue_id: str,
        type: ConsumerType,
        script_name: str,
        settings: ConsumerSettings,
        dead_letter_queue: str,
    ) -> ConsumerInfo:
        body = wire.consumer_request(type, script_name, settings, dead_letter_queue)
        info = self._result(wire.Consumer, "POST", f"{self._cf}/{queue_id}/consumers", body).to_model()
        with self._lock:
            self._consumer_queue[info.consumer_id] = queue_id
        return info

    def update_consumer(self, consumer_id: str, settings: ConsumerSettings, dead_letter_queue: str) -> ConsumerInfo:
        queue_id = self._queue_of_consumer(consumer_id)
        path = f"{self._cf}/{queue_id}/consumers/{consumer_id}"
        current = self._result(wire.Consumer, "GET", path).to_model()
        body = wire.consumer_request(current.type, current.script_name, settings, dead_letter_queue)
        return self._result(wire.Consumer, "PUT", path, body).to_model()

    def remove_consumer(self, consumer_id: str) -> None:
        queue_id = self._queue_of_consumer(consumer_id)
        try:
            self._result(type(None), "DELETE", f"{self._cf}/{queue_id}/consumers/{consumer_id}")
        except QueueNotFound:
            raise ConsumerNotFound(f"consumer {consumer_id!r} does not exist") from None

    def add_shard(self, queue_id: str) -> int:
        return self._result(wire.Shards, "POST", f"{self._cv}/{queue_id}/shards").shards

    # -- messages -----------------------------------------------------------------------------
    def enqueue(
        self, queue_id: str, messages: Sequence[NewMessage], *, urgent: bool = False, owed: bool = False
    ) -> SendBatchResult:
        """``urgent`` and ``owed`` change nothing here: the server stores each request's send as
        it comes, durably."""
        body = wire.enqueue_request(list(messages))
        return self._result(wire.EnqueueResult, "POST", f"{self._cv}/{queue_id}/enqueue", body).to_result()

    def _lease(self, queue_id: str, body: wire.LeaseRequest) -> list[StoredMessage]:
        leased = self._result(wire.LeaseResult, "POST", f"{self._cv}/{queue_id}/lease", body)
        return [m.to_model() for m in leased.messages]

    def lease(
        self, queue_id: str, max_messages: int, visibility_ms: int, policy: DeliveryPolicy
    ) -> list[StoredMessage]:
        return self._lease(queue_id, wire.LeaseRequest(max_messages, visibility_ms, wire.policy(policy)))

    idle_wait_seconds = LONG_POLL_SECONDS
    paused_poll_seconds = 2.0

    def lease_waiting(
        self, queue_id: str, max_messages: int, visibility_ms: int, policy: DeliveryPolicy, wait_seconds: float
    ) -> list[StoredMessage]:
        """One long-polled request: the server leases as soon as messages arrive, or answers empty."""
        wait_ms = int(min(wait_seconds, LONG_POLL_SECONDS) * 1000)
        with self._lock:
            self._holding[queue_id] = self._holding.get(queue_id, 0) + 1
            if queue_id in self._woken:  # woken just before this call: do not hold
                self._woken.discard(queue_id)
                wait_ms = 0
        try:
            body = wire.LeaseRequest(max_messages, visibility_ms, wire.policy(policy), wait_ms, self._waiter)
            return self._lease(queue_id, body)
        finally:
            with self._lock:
                self._holding[queue_id] -= 1

    def wake(self, queue_id: str) -> None:
        """End this client's held leases on the queue now (a dispatcher stopping)."""
        with self._lock:
            holding = self._holding.get(queue_id, 0)
            if not holding:
                self._woken.add(queue_id)
        if holding:
            with contextlib.suppress(ConveyorError):  # if it fails, the held lease ends within LONG_POLL_SECONDS
                self._result(type(None), "POST", f"{self._cv}/{queue_id}/wake", wire.WakeRequest(self._waiter))

    def extend(self, queue_id: str, lease_ids: Sequence[str], visibility_ms: int) -> None:
        body = wire.ExtendRequest(list(lease_ids), visibility_ms)
        self._result(type(None), "POST", f"{self._cv}/{queue_id}/extend", body)

    def settle(
        self,
        queue_id: str,
        acks: Sequence[str],
        retries: Sequence[tuple[str, int]],
        policy: DeliveryPolicy,
        *,
        durable: bool = True,  # the server commits every settle durably
    ) -> SettleResult:
        body = wire.SettleRequest(list(acks), [wire.Retry(lid, delay) for lid, delay in retries], wire.policy(policy))
        return self._result(wire.SettleResult, "POST", f"{self._cv}/{queue_id}/settle", body).to_model()

    def release(self, queue_id: str, lease_ids: Sequence[str]) -> None:
        self._result(type(None), "POST", f"{self._cv}/{queue_id}/release", wire.ReleaseRequest(list(lease_ids)))

    def purge(self, queue_id: str) -> int:
        return self._result(wire.Purged, "POST", f"{self._cv}/{queue_id}/purge").purged

    def peek(self, queue_id: str, max_messages: int) -> list[StoredMessage]:
        body = wire.PeekRequest(max_messages)
        peeked = self._result(wire.PeekResult, "POST", f"{self._cf}/{queue_id}/messages/peek", body)
        return [m.to_model() for m in peeked.messages]

    def metrics(self, queue_id: str) -> Metrics:
        return self._result(wire.Metrics, "GET", f"{self._cf}/{queue_id}/metrics").to_model()

    def counters(self, queue_id: str) -> Counters:
        return self._result(wire.Counters, "GET", f"{self._cv}/{queue_id}/counters").to_model()

    def queue_history(self, queue_id: str, minutes: int) -> list[dict[str, Any]]:
        """The queue's history as the server's coordinator recorded it (``history_rows``' shape)."""
        path = f"{self._cv}/{queue_id}/history"
        points = self._answer(list[wire.HistoryPoint], "GET", path, params={"minutes": minutes}).result
        return [wire.to_builtins(point) for point in points]

    def expire(self) -> dict[str, int]:
        """Retention runs in the server's coordinator; a remote client has nothing to expire."""
        return {}

    def redrive(self, from_queue_id: str, to_queue_id: str) -> int:
        body = wire.RedriveRequest(to_queue_id)
        return self._result(wire.Moved, "POST", f"{self._cv}/{from_queue_id}/redrive", body).moved

    def next_visible_ms(self, queue_id: str) -> int | None:
        return self._result(wire.NextVisible, "GET", f"{self._cv}/{queue_id}/next-visible").next_visible_ms

    def wait(self, queue_id: str, timeout: float) -> None:
        # One long poll: the server answers early when messages may have arrived, and callers loop.
        if timeout > 0:
            body = wire.WaitRequest(min(timeout, MAX_WAIT_SECONDS))
            self._result(type(None), "POST", f"{self._cv}/{queue_id}/wait", body)

    def deployment(self) -> Deployment:
        return Deployment("http", self._base_url, self.account_id, self._token)

    def acquire_leadership(self) -> bool:
        # Maintenance (retention, shard splits) runs in the server, next to the storage.
        return False

    # -- the worker registry ------------------------------------------------------------------
    def record_worker(self, entry: WorkerEntry, registered_by: str = "") -> None:
        """Register (or heartbeat) this worker with the server, for the token's account."""
        self._result(type(None), "PUT", f"{self._workers}/{entry.worker_id}", wire.worker_request(entry))

    def remove_worker(self, worker_id: str, registered_by: str = "") -> None:
        self._result(type(None), "DELETE", f"{self._workers}/{worker_id}")

    def list_workers(self) -> list[WorkerEntry]:
        return [w.to_model() for w in self._result(list[wire.Worker], "GET", self._workers)]

    def close(self) -> None:
        self._http.close()
