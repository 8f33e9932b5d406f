"""The remote transport: :class:`RemoteEngine` implements the engine interface over HTTP, so
``conveyor.connect("http://host:8787", token=..., account_id=...)`` is the same API as the embedded
one, and ``App`` workers consume over HTTP (leases, heartbeats and settles through Conveyor's
``/conveyor/v1`` endpoints; queues and consumers through Cloudflare's ``/client/v4`` API).

>>> cv = conveyor.connect("http://127.0.0.1:8787", token="cvt_...", account_id="acc1")
>>> cv.create_queue("emails").send({"to": "a@b"})
"""

from __future__ import annotations

import base64
import contextlib
import threading
from collections.abc import Sequence
from typing import Any

import httpx

from conveyor import errors
from conveyor.codec import decode_json, encode_json
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
    WorkerRun,
)

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


def _error(response: httpx.Response) -> ConveyorError:
    """The ConveyorError a refusal stands for: the class the server names, else by HTTP status."""
    try:
        message = response.json()["errors"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        message = response.text or response.reason_phrase
    cls = getattr(errors, response.headers.get("conveyor-error", ""), None)
    if not (isinstance(cls, type) and issubclass(cls, ConveyorError)):
        cls = _BY_STATUS.get(response.status_code)
        if cls is None:
            cls = errors.InvalidRequest if response.status_code < 500 else ConveyorError
    retry_after = response.headers.get("retry-after", "")
    return cls(message, retry_after=float(retry_after) if retry_after.isdigit() else None)


def _consumer(raw: dict[str, Any], queue_id: str) -> ConsumerInfo:
    s = raw.get("settings") or {}
    defaults = ConsumerSettings()
    return ConsumerInfo(
        consumer_id=raw["consumer_id"],
        queue_id=raw.get("queue_id", queue_id),
        queue_name=raw["queue_name"],
        type=raw["type"],
        script_name=raw.get("script_name") or raw.get("script") or "",
        created_on=raw["created_on"],
        dead_letter_queue=raw.get("dead_letter_queue") or "",
        settings=ConsumerSettings(
            batch_size=s.get("batch_size", defaults.batch_size),
            max_retries=s.get("max_retries", defaults.max_retries),
            max_wait_time_ms=s.get("max_wait_time_ms", defaults.max_wait_time_ms),
            max_concurrency=s.get("max_concurrency"),
            retry_delay=s.get("retry_delay", defaults.retry_delay),
            visibility_timeout_ms=s.get("visibility_timeout_ms", defaults.visibility_timeout_ms),
        ),
    )


def _queue(raw: dict[str, Any]) -> QueueInfo:
    s = raw["settings"]
    return QueueInfo(
        queue_id=raw["queue_id"],
        queue_name=raw["queue_name"],
        created_on=raw["created_on"],
        modified_on=raw["modified_on"],
        settings=QueueSettings(s["delivery_delay"], s["delivery_paused"], s["message_retention_period"]),
        consumers=tuple(_consumer(c, raw["queue_id"]) for c in raw.get("consumers", [])),
        shards=raw.get("shards", 1),
        storage_error=raw.get("storage_error"),
    )


def _consumer_body(type: str, script_name: str, settings: ConsumerSettings, dlq: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": type,
        "dead_letter_queue": dlq,
        "settings": {
            "batch_size": settings.batch_size,
            "max_retries": settings.max_retries,
            "max_wait_time_ms": settings.max_wait_time_ms,
            "max_concurrency": settings.max_concurrency,
            "retry_delay": settings.retry_delay,
            "visibility_timeout_ms": settings.visibility_timeout_ms,
        },
    }
    if script_name:
        body["script_name"] = script_name
    return body


def _policy(policy: DeliveryPolicy) -> dict[str, Any]:
    return {"max_retries": policy.max_retries, "dead_letter_queue": policy.dead_letter_queue or ""}


def _worker(raw: dict[str, Any]) -> WorkerEntry:
    runs = tuple(
        WorkerRun(r["queue_id"], r["queue_name"], r["script_name"], r.get("max_concurrency"), r.get("concurrency", 0))
        for r in raw.get("runs", [])
    )
    return WorkerEntry(raw["worker_id"], raw["host"], raw["pid"], raw["started_ms"], raw["heartbeat_ms"], runs)


def _stored(raw: dict[str, Any]) -> StoredMessage:
    return StoredMessage(
        raw["id"],
        raw["timestamp_ms"],
        base64.b64decode(raw["body"]),
        raw["content_type"],
        raw["attempts"],
        raw["lease_id"],
    )


class RemoteEngine(Engine):
    """An engine on the far side of ``conveyor serve`` (see the module docstring)."""

    def __init__(self, url: str, *, token: str | None, account_id: str, timeout: float = 30.0) -> None:
        if not account_id:
            raise errors.InvalidRequest("connecting over HTTP needs an account_id")
        self.clock = SystemClock()
        self.account_id = account_id
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
    def _call(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
        content = None if body is None else encode_json(body)
        headers = None if body is None else _JSON
        try:
            response = self._http.request(method, path, content=content, headers=headers, params=params)
        except httpx.TransportError as exc:
            raise ConveyorError(f"cannot reach the Conveyor server: {exc}") from exc
        if response.status_code >= 400:
            raise _error(response)
        return decode_json(response.content)

    def _result(self, method: str, path: str, body: Any = None) -> Any:
        return self._call(method, path, body)["result"]

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
        body = {
            "queue_name": name,
            "settings": {
                "delivery_delay": settings.delivery_delay,
                "delivery_paused": settings.delivery_paused,
                "message_retention_period": settings.message_retention_period,
            },
        }
        info = _queue(self._result("POST", self._cf, body))
        for _ in range(shards - 1):
            self.add_shard(info.queue_id)
        return self.get_queue_by_id(info.queue_id) if shards > 1 else self._remember(info)

    def get_queue(self, name: str) -> QueueInfo:
        found = self._call("GET", self._cf, params={"name": name})["result"]
        if not found:
            raise QueueNotFound(f"queue {name!r} does not exist")
        return self._remember(_queue(found[0]))

    def get_queue_by_id(self, queue_id: str) -> QueueInfo:
        return self._remember(_queue(self._result("GET", f"{self._cf}/{queue_id}")))

    def list_queues(self, prefix: str = "") -> list[QueueInfo]:
        """The account's queues (the server lists one account's only); ``prefix`` is matched here."""
        out: list[QueueInfo] = []
        page = 1
        while True:
            answer = self._call("GET", self._cf, params={"page": page, "per_page": 1000})
            out.extend(self._remember(_queue(q)) for q in answer["result"] if q["queue_name"].startswith(prefix))
            if page >= answer["result_info"]["total_pages"]:
                return out
            page += 1

    def update_queue(self, queue_id: str, settings: QueueSettings) -> QueueInfo:
        body = {
            "settings": {
                "delivery_delay": settings.delivery_delay,
                "delivery_paused": settings.delivery_paused,
                "message_retention_period": settings.message_retention_period,
            }
        }
        return self._remember(_queue(self._result("PUT", f"{self._cf}/{queue_id}", body)))

    def delete_queue(self, queue_id: str, *, force: bool = False) -> list[str]:
        if not force:
            self._result("DELETE", f"{self._cf}/{queue_id}")
            return []
        result = self._call("DELETE", f"{self._cf}/{queue_id}", params={"force": "true"})["result"]
        return list(result["kept_aside"])

    def add_consumer(
        self,
        queue_id: str,
        type: ConsumerType,
        script_name: str,
        settings: ConsumerSettings,
        dead_letter_queue: str,
    ) -> ConsumerInfo:
        body = _consumer_body(type, script_name, settings, dead_letter_queue)
        info = _consumer(self._result("POST", f"{self._cf}/{queue_id}/consumers", body), queue_id)
        with self._lock:
            self._consumer_queue[info.consumer_id] = queue_id
        return info

    def update_consumer(self, consumer_id: str, settings: ConsumerSettings, dead_letter_queue: str) -> ConsumerInfo:
        queue_id = self._queue_of_consumer(consumer_id)
        current = self._result("GET", f"{self._cf}/{queue_id}/consumers/{consumer_id}")
        body = _consumer_body(current["type"], current.get("script_name", ""), settings, dead_letter_queue)
        return _consumer(self._result("PUT", f"{self._cf}/{queue_id}/consumers/{consumer_id}", body), queue_id)

    def remove_consumer(self, consumer_id: str) -> None:
        queue_id = self._queue_of_consumer(consumer_id)
        try:
            self._result("DELETE", f"{self._cf}/{queue_id}/consumers/{consumer_id}")
        except QueueNotFound:
            raise ConsumerNotFound(f"consumer {consumer_id!r} does not exist") from None

    def add_shard(self, queue_id: str) -> int:
        return int(self._result("POST", f"{self._cv}/{queue_id}/shards")["shards"])

    # -- messages -----------------------------------------------------------------------------
    def enqueue(self, queue_id: str, messages: Sequence[NewMessage]) -> SendBatchResult:
        body = {
            "messages": [
                {
                    "body": base64.b64encode(m.body).decode(),
                    "content_type": m.content_type,
                    "delay_seconds": m.delay_seconds,
                }
                for m in messages
            ]
        }
        result = self._result("POST", f"{self._cv}/{queue_id}/enqueue", body)
        ids = result.pop("message_ids")
        return SendBatchResult(ids, Metrics(**result))

    def lease(
        self, queue_id: str, max_messages: int, visibility_ms: int, policy: DeliveryPolicy
    ) -> list[StoredMessage]:
        body = {"max_messages": max_messages, "visibility_ms": visibility_ms, "policy": _policy(policy)}
        return [_stored(m) for m in self._result("POST", f"{self._cv}/{queue_id}/lease", body)["messages"]]

    idle_wait_seconds = LONG_POLL_SECONDS
    paused_poll_seconds = 2.0

    def lease_waiting(
        self, queue_id: str, max_messages: int, visibility_ms: int, policy: DeliveryPolicy, wait_seconds: float
    ) -> list[StoredMessage]:
        """One long-polled request: the server leases as soon as messages arrive, or answers empty."""
        body = {
            "max_messages": max_messages,
            "visibility_ms": visibility_ms,
            "policy": _policy(policy),
            "wait_ms": int(min(wait_seconds, LONG_POLL_SECONDS) * 1000),
            "waiter": self._waiter,
        }
        with self._lock:
            self._holding[queue_id] = self._holding.get(queue_id, 0) + 1
            if queue_id in self._woken:  # woken just before this call: do not hold
                self._woken.discard(queue_id)
                body["wait_ms"] = 0
        try:
            return [_stored(m) for m in self._result("POST", f"{self._cv}/{queue_id}/lease", body)["messages"]]
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
                self._result("POST", f"{self._cv}/{queue_id}/wake", {"waiter": self._waiter})

    def extend(self, queue_id: str, lease_ids: Sequence[str], visibility_ms: int) -> None:
        self._result(
            "POST", f"{self._cv}/{queue_id}/extend", {"lease_ids": list(lease_ids), "visibility_ms": visibility_ms}
        )

    def settle(
        self,
        queue_id: str,
        acks: Sequence[str],
        retries: Sequence[tuple[str, int]],
        policy: DeliveryPolicy,
    ) -> SettleResult:
        body = {
            "acks": list(acks),
            "retries": [{"lease_id": lid, "delay_seconds": delay} for lid, delay in retries],
            "policy": _policy(policy),
        }
        r = self._result("POST", f"{self._cv}/{queue_id}/settle", body)
        return SettleResult(r["acked"], r["retried"], r["dead_lettered"], r["dropped"], dict(r["warnings"]))

    def release(self, queue_id: str, lease_ids: Sequence[str]) -> None:
        self._result("POST", f"{self._cv}/{queue_id}/release", {"lease_ids": list(lease_ids)})

    def purge(self, queue_id: str) -> int:
        return int(self._result("POST", f"{self._cv}/{queue_id}/purge")["purged"])

    def peek(self, queue_id: str, max_messages: int) -> list[StoredMessage]:
        raw = self._result("POST", f"{self._cf}/{queue_id}/messages/peek", {"batch_size": max_messages})
        out = []
        for m in raw["messages"]:
            kind = m["metadata"]["CF-Content-Type"]
            body = m["body"].encode() if kind == "text" else base64.b64decode(m["body"])
            out.append(StoredMessage(m["id"], m["timestamp_ms"], body, kind, m["attempts"], ""))
        return out

    def metrics(self, queue_id: str) -> Metrics:
        return Metrics(**self._result("GET", f"{self._cf}/{queue_id}/metrics"))

    def counters(self, queue_id: str) -> Counters:
        return Counters(**self._result("GET", f"{self._cv}/{queue_id}/counters"))

    def expire(self) -> dict[str, int]:
        """Retention runs in the server's coordinator; a remote client has nothing to expire."""
        return {}

    def redrive(self, from_queue_id: str, to_queue_id: str) -> int:
        return int(self._result("POST", f"{self._cv}/{from_queue_id}/redrive", {"to_queue_id": to_queue_id})["moved"])

    def next_visible_ms(self, queue_id: str) -> int | None:
        value = self._result("GET", f"{self._cv}/{queue_id}/next-visible")["next_visible_ms"]
        return None if value is None else int(value)

    def wait(self, queue_id: str, timeout: float) -> None:
        # One long poll: the server answers early when messages may have arrived, and callers loop.
        if timeout > 0:
            self._result("POST", f"{self._cv}/{queue_id}/wait", {"timeout": min(timeout, MAX_WAIT_SECONDS)})

    def acquire_leadership(self) -> bool:
        # Maintenance (retention, shard splits) runs in the server, next to the storage.
        return False

    # -- the worker registry ------------------------------------------------------------------
    def record_worker(self, entry: WorkerEntry, registered_by: str = "") -> None:
        """Register (or heartbeat) this worker with the server, for the token's account."""
        body = {
            "host": entry.host,
            "pid": entry.pid,
            "started_ms": entry.started_ms,
            "runs": [
                {
                    "queue_id": run.queue_id,
                    "script_name": run.script_name,
                    "max_concurrency": run.max_concurrency,
                    "concurrency": run.concurrency,
                }
                for run in entry.runs
            ],
        }
        self._result("PUT", f"{self._workers}/{entry.worker_id}", body)

    def remove_worker(self, worker_id: str, registered_by: str = "") -> None:
        self._result("DELETE", f"{self._workers}/{worker_id}")

    def list_workers(self) -> list[WorkerEntry]:
        return [_worker(raw) for raw in self._result("GET", self._workers)]

    def close(self) -> None:
        self._http.close()
