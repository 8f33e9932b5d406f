"""Conveyor's own ``/conveyor/v1`` shapes: the engine primitives the remote transport speaks
(leases with a delivery policy, extend, settle, release, counters, redrive, a long-poll wait) and the
worker registry. Bodies travel as base64 of the stored bytes, so what a remote producer stores is
byte for byte what an embedded one would."""

from __future__ import annotations

import base64
import math

import msgspec

from conveyor import limits, model
from conveyor.codec import check_content_type
from conveyor.tracing import check_traceparent
from conveyor.wire.decoding import Shape
from conveyor.wire.queues import Metrics


class EncodedMessage(Shape, omit_defaults=True):
    """A message to store: its encoded bytes in base64; no delay is the queue's delivery_delay;
    ``traceparent`` the W3C trace context it was sent in."""

    body: str = ""
    content_type: str = "json"
    delay_seconds: int | None = None
    traceparent: str | None = None


class EnqueueRequest(Shape):
    messages: list[EncodedMessage] = []


def enqueue_request(messages: list[model.NewMessage]) -> EnqueueRequest:
    return EnqueueRequest(
        [
            EncodedMessage(base64.b64encode(m.body).decode(), m.content_type, _whole(m.delay_seconds), m.traceparent)
            for m in messages
        ]
    )


def _whole(delay: float | None) -> int | None:
    """The wire carries whole seconds: a fraction (a workflow's wake-up) is rounded up, never early."""
    return None if delay is None else math.ceil(delay)


class EnqueueResult(Metrics, kw_only=True):
    """The queue's metrics just after, and the ids the messages got, in order."""

    message_ids: list[str]

    def to_result(self) -> model.SendBatchResult:
        return model.SendBatchResult(self.message_ids, self.to_model())


class Policy(Shape):
    max_retries: int = limits.DEFAULT_MAX_RETRIES
    dead_letter_queue: str | None = None


def policy(p: model.DeliveryPolicy) -> Policy:
    return Policy(p.max_retries, p.dead_letter_queue or "")


class LeaseRequest(Shape, omit_defaults=True):
    """With ``wait_ms``, an empty answer is held until messages arrive or the time passes; ``waiter``
    names the client's held leases, so ``wake`` ends only its own."""

    max_messages: int = 1
    visibility_ms: int = limits.DEFAULT_VISIBILITY_TIMEOUT_MS
    policy: Policy = msgspec.field(default_factory=Policy)
    wait_ms: int = 0
    waiter: str | None = None


class LeasedMessage(Shape, omit_defaults=True):
    id: str
    timestamp_ms: int
    body: str
    content_type: str
    attempts: int
    lease_id: str
    traceparent: str | None = None

    def to_model(self) -> model.StoredMessage:
        kind = check_content_type(self.content_type)
        traceparent = None if self.traceparent is None else check_traceparent(self.traceparent, "the traceparent")
        return model.StoredMessage(
            self.id, self.timestamp_ms, base64.b64decode(self.body), kind, self.attempts, self.lease_id, traceparent
        )


def leased(m: model.StoredMessage) -> LeasedMessage:
    return LeasedMessage(
        m.id, m.timestamp_ms, base64.b64encode(m.body).decode(), m.content_type, m.attempts, m.lease_id, m.traceparent
    )


class LeaseResult(Shape):
    messages: list[LeasedMessage]


class WakeRequest(Shape):
    waiter: str | None = None


class ExtendRequest(Shape):
    lease_ids: list[str] = []
    visibility_ms: int = limits.DEFAULT_VISIBILITY_TIMEOUT_MS


class Retry(Shape):
    lease_id: str
    delay_seconds: int = 0


class SettleRequest(Shape):
    acks: list[str] = []
    retries: list[Retry] = []
    policy: Policy = msgspec.field(default_factory=Policy)


class SettleResult(Shape):
    acked: int
    retried: int
    dead_lettered: int
    dropped: int
    warnings: dict[str, str]

    def to_model(self) -> model.SettleResult:
        return model.SettleResult(self.acked, self.retried, self.dead_lettered, self.dropped, dict(self.warnings))


def settled(r: model.SettleResult) -> SettleResult:
    return SettleResult(r.acked, r.retried, r.dead_lettered, r.dropped, r.warnings)


class ReleaseRequest(Shape):
    lease_ids: list[str] = []


class WaitRequest(Shape):
    timeout: float = 1.0


class RedriveRequest(Shape):
    to_queue_id: str = ""


class Counters(Shape):
    """Conveyor's lifetime counters of a queue (no Cloudflare equivalent)."""

    sent: int
    acked: int
    retried: int
    dead_lettered: int
    expired: int
    dropped: int
    in_flight: int

    def to_model(self) -> model.Counters:
        return model.Counters(
            self.sent, self.acked, self.retried, self.dead_lettered, self.expired, self.dropped, self.in_flight
        )


def counters(c: model.Counters) -> Counters:
    return Counters(c.sent, c.acked, c.retried, c.dead_lettered, c.expired, c.dropped, c.in_flight)


class NextVisible(Shape):
    next_visible_ms: int | None


class HistoryPoint(Shape):
    """One recorded point of a queue's history (``conveyor.engine.history.history_rows``)."""

    at_ms: int
    backlog: int
    backlog_bytes: int
    oldest_age_ms: int
    in_flight: int
    concurrency: int
    sent_per_second: float
    acked_per_second: float
    retried_per_second: float
    dead_lettered_per_second: float


class Moved(Shape):
    moved: int


class Purged(Shape):
    purged: int


class Shards(Shape):
    shards: int


# -- the worker registry ------------------------------------------------------------------------
class RunRequest(Shape):
    """One queue a remote worker runs (its name is filled in from the catalog, never taken from it)."""

    queue_id: str
    script_name: str
    max_concurrency: int | None = None
    concurrency: int | None = None


class WorkerRequest(Shape):
    """A remote worker's registration or heartbeat (the server's clock says when it heard from it)."""

    host: str
    pid: int
    started_ms: int
    runs: list[RunRequest] = []


def worker_request(entry: model.WorkerEntry) -> WorkerRequest:
    return WorkerRequest(
        entry.host,
        entry.pid,
        entry.started_ms,
        [RunRequest(r.queue_id, r.script_name, r.max_concurrency, r.concurrency) for r in entry.runs],
    )


class WorkerRun(Shape):
    queue_id: str
    queue_name: str
    script_name: str
    max_concurrency: int | None
    concurrency: int


class Worker(Shape):
    worker_id: str
    host: str
    pid: int
    started_ms: int
    heartbeat_ms: int
    runs: list[WorkerRun]

    def to_model(self) -> model.WorkerEntry:
        runs = tuple(
            model.WorkerRun(r.queue_id, r.queue_name, r.script_name, r.max_concurrency, r.concurrency)
            for r in self.runs
        )
        return model.WorkerEntry(self.worker_id, self.host, self.pid, self.started_ms, self.heartbeat_ms, runs)


def worker(e: model.WorkerEntry) -> Worker:
    runs = [WorkerRun(r.queue_id, r.queue_name, r.script_name, r.max_concurrency, r.concurrency) for r in e.runs]
    return Worker(e.worker_id, e.host, e.pid, e.started_ms, e.heartbeat_ms, runs)
