"""Plain data: what the engines store and what the API returns.

Nothing here talks to storage; these are the values that cross the engine interface and the public
API.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from conveyor import limits
from conveyor.codec import ContentType


@dataclass(frozen=True, slots=True)
class QueueSettings:
    delivery_delay: int = 0
    delivery_paused: bool = False
    message_retention_period: int = limits.DEFAULT_RETENTION_SECONDS


@dataclass(frozen=True, slots=True)
class QueueInfo:
    queue_id: str
    queue_name: str
    created_on: str
    modified_on: str
    settings: QueueSettings
    consumers: tuple[ConsumerInfo, ...] = ()
    shards: int = 1
    # Why the queue's stored messages cannot be read (a damaged or missing shard file), else None.
    storage_error: str | None = None


ConsumerType = Literal["worker", "http_pull"]


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """A consumer's delivery policy. Push consumers use every field; pull consumers ignore
    ``max_wait_time_ms`` and ``max_concurrency``."""

    batch_size: int = limits.DEFAULT_MAX_BATCH_SIZE
    max_retries: int = limits.DEFAULT_MAX_RETRIES
    max_wait_time_ms: int = int(limits.DEFAULT_MAX_BATCH_TIMEOUT * 1000)
    max_concurrency: int | None = None
    retry_delay: int = 0
    visibility_timeout_ms: int = limits.DEFAULT_VISIBILITY_TIMEOUT_MS


@dataclass(frozen=True, slots=True)
class ConsumerInfo:
    consumer_id: str
    queue_id: str
    queue_name: str
    type: ConsumerType
    script_name: str
    created_on: str
    dead_letter_queue: str
    settings: ConsumerSettings


@dataclass(frozen=True, slots=True)
class Metrics:
    backlog_count: int
    backlog_bytes: int
    oldest_message_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class Counters:
    """Lifetime counters of a queue, summed over its shards."""

    sent: int = 0
    acked: int = 0
    retried: int = 0
    dead_lettered: int = 0
    expired: int = 0
    dropped: int = 0
    in_flight: int = 0


class NewMessage(NamedTuple):
    """An encoded message on its way into storage. ``delay_seconds`` is the message's or its
    batch's delay; ``None`` means the queue's ``delivery_delay``, which the engine applies when it
    stores the message (so a producer never acts on a stale copy of the queue's settings). The
    public API gives whole seconds; a workflow's wake-up gives a fraction, so that an instance
    wakes at the millisecond it asked for (:func:`visible_at_ms`).

    (Named tuples, not dataclasses, for the two message types and the send results: one is made
    per message or send, and a tuple is made in half the time of a frozen dataclass.)
    """

    body: bytes
    content_type: ContentType
    delay_seconds: float | None
    # The W3C traceparent of the context that sent it (conveyor.tracing), delivered with it.
    traceparent: str | None = None


def visible_at_ms(now_ms: int, delay_seconds: float) -> int:
    """When a message stored at ``now_ms`` with ``delay_seconds`` becomes deliverable."""
    return now_ms + math.ceil(delay_seconds * 1000)


class SendResult(NamedTuple):
    """What :meth:`Queue.send` stored: the message's ``id`` (as its consumer will see it) and the
    queue's ``metrics`` just after.

    >>> r = q.send({"to": "a@b"}); r.id, r.metrics.backlog_count
    ('6f1c...', 1)
    """

    id: str
    metrics: Metrics


class SendBatchResult(NamedTuple):
    """What :meth:`Queue.send_batch` (and an engine's ``enqueue``) stored: the messages' ``ids``,
    in the order given, and the queue's ``metrics`` just after.

    >>> r = q.send_batch([{"body": 1}, {"body": 2}]); len(r.ids), r.metrics.backlog_count
    (2, 2)
    """

    ids: list[str]
    metrics: Metrics


class StoredMessage(NamedTuple):
    """A message as an engine hands it out (leased, or peeked with an empty ``lease_id``)."""

    id: str
    timestamp_ms: int
    body: bytes
    content_type: ContentType
    attempts: int
    lease_id: str
    traceparent: str | None = None


@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    """What happens to a message whose deliveries are used up."""

    max_retries: int = limits.DEFAULT_MAX_RETRIES
    dead_letter_queue: str | None = None

    @property
    def max_deliveries(self) -> int:
        return self.max_retries + 1


@dataclass(frozen=True, slots=True)
class SettleResult:
    """What an engine did with a group of acks and retries."""

    acked: int = 0
    retried: int = 0
    dead_lettered: int = 0
    dropped: int = 0
    warnings: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PulledMessage:
    id: str
    body: Any
    attempts: int
    lease_id: str
    timestamp_ms: int
    content_type: ContentType
    traceparent: str | None = None


@dataclass(frozen=True, slots=True)
class AckResult:
    ack_count: int
    retry_count: int
    warnings: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WorkerRun:
    """One push consumer a worker process runs: its queue, its script, and how many batches it
    runs at once (``concurrency``) of at most ``max_concurrency`` (``None``: automatic)."""

    queue_id: str
    queue_name: str
    script_name: str
    max_concurrency: int | None = None
    concurrency: int = 0


@dataclass(frozen=True, slots=True)
class WorkerEntry:
    """A worker process in the deployment's registry (``conveyor workers list``)."""

    worker_id: str
    host: str
    pid: int
    started_ms: int
    heartbeat_ms: int
    runs: tuple[WorkerRun, ...] = ()
