"""The catalog of Cloudflare's v4 API: queues, consumers, metrics, purges; and how each maps to
:mod:`conveyor.model`."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from conveyor import model
from conveyor.wire.decoding import Shape


# -- answers ------------------------------------------------------------------------------------
class Metrics(Shape):
    backlog_count: int
    backlog_bytes: int
    oldest_message_timestamp_ms: int

    def to_model(self) -> model.Metrics:
        return model.Metrics(self.backlog_count, self.backlog_bytes, self.oldest_message_timestamp_ms)


def metrics(m: model.Metrics) -> Metrics:
    return Metrics(m.backlog_count, m.backlog_bytes, m.oldest_message_timestamp_ms)


class ConsumerSettings(Shape, kw_only=True):
    """A worker consumer has every field; an http_pull one has no ``max_wait_time_ms`` or
    ``max_concurrency``. ``visibility_timeout_ms`` is Conveyor's own for a worker: the lease a push
    worker holds (and renews) while its handler runs."""

    batch_size: int
    max_retries: int
    max_wait_time_ms: int | UnsetType = UNSET
    max_concurrency: int | UnsetType | None = UNSET
    retry_delay: int
    visibility_timeout_ms: int


class Consumer(Shape, kw_only=True):
    consumer_id: str
    queue_id: str
    queue_name: str
    type: Literal["worker", "http_pull"]
    created_on: str
    dead_letter_queue: str
    # wrangler reads `script`, the Python SDK `script_name`: a worker consumer has both.
    script_name: str | UnsetType = UNSET
    script: str | UnsetType = UNSET
    settings: ConsumerSettings

    def to_model(self) -> model.ConsumerInfo:
        s, defaults = self.settings, model.ConsumerSettings()
        return model.ConsumerInfo(
            consumer_id=self.consumer_id,
            queue_id=self.queue_id,
            queue_name=self.queue_name,
            type=self.type,
            script_name=_given(self.script_name, ""),
            created_on=self.created_on,
            dead_letter_queue=self.dead_letter_queue,
            settings=model.ConsumerSettings(
                batch_size=s.batch_size,
                max_retries=s.max_retries,
                max_wait_time_ms=_given(s.max_wait_time_ms, defaults.max_wait_time_ms),
                max_concurrency=_given(s.max_concurrency, None),
                retry_delay=s.retry_delay,
                visibility_timeout_ms=s.visibility_timeout_ms,
            ),
        )


def consumer(c: model.ConsumerInfo) -> Consumer:
    s = c.settings
    worker = c.type == "worker"
    return Consumer(
        consumer_id=c.consumer_id,
        queue_id=c.queue_id,
        queue_name=c.queue_name,
        type=c.type,
        created_on=c.created_on,
        dead_letter_queue=c.dead_letter_queue,
        script_name=c.script_name if worker else UNSET,
        script=c.script_name if worker else UNSET,
        settings=ConsumerSettings(
            batch_size=s.batch_size,
            max_retries=s.max_retries,
            max_wait_time_ms=s.max_wait_time_ms if worker else UNSET,
            max_concurrency=s.max_concurrency if worker else UNSET,
            retry_delay=s.retry_delay,
            visibility_timeout_ms=s.visibility_timeout_ms,
        ),
    )


class QueueSettings(Shape):
    delivery_delay: int
    delivery_paused: bool
    message_retention_period: int


class Queue(Shape, kw_only=True):
    queue_id: str
    queue_name: str
    created_on: str
    modified_on: str
    producers: list[Any] = []
    producers_total_count: int = 0
    consumers: list[Consumer]
    consumers_total_count: int
    shards: int = 1
    settings: QueueSettings
    # Conveyor's own: why a queue's stored messages cannot be read (a damaged shard file).
    storage_error: str | UnsetType = UNSET

    def to_model(self) -> model.QueueInfo:
        s = self.settings
        return model.QueueInfo(
            queue_id=self.queue_id,
            queue_name=self.queue_name,
            created_on=self.created_on,
            modified_on=self.modified_on,
            settings=model.QueueSettings(s.delivery_delay, s.delivery_paused, s.message_retention_period),
            consumers=tuple(c.to_model() for c in self.consumers),
            shards=self.shards,
            storage_error=_given(self.storage_error, None),
        )


def queue(q: model.QueueInfo) -> Queue:
    s = q.settings
    return Queue(
        queue_id=q.queue_id,
        queue_name=q.queue_name,
        created_on=q.created_on,
        modified_on=q.modified_on,
        consumers=[consumer(c) for c in q.consumers],
        consumers_total_count=len(q.consumers),
        shards=q.shards,
        settings=QueueSettings(s.delivery_delay, s.delivery_paused, s.message_retention_period),
        storage_error=UNSET if q.storage_error is None else q.storage_error,
    )


class KeptAside(Shape):
    """A forced delete (Conveyor's own): where the damaged files went."""

    kept_aside: list[str]


class PurgeStatus(Shape):
    started_at: str
    completed: bool


# -- requests -----------------------------------------------------------------------------------
class QueueSettingsChange(Shape, omit_defaults=True):
    """The settings a create, replace or edit names; the others keep their value (or default)."""

    delivery_delay: int | None = None
    delivery_paused: bool | None = None
    message_retention_period: int | None = None

    def over(self, base: model.QueueSettings) -> model.QueueSettings:
        return model.QueueSettings(
            delivery_delay=base.delivery_delay if self.delivery_delay is None else self.delivery_delay,
            delivery_paused=base.delivery_paused if self.delivery_paused is None else self.delivery_paused,
            message_retention_period=(
                base.message_retention_period
                if self.message_retention_period is None
                else self.message_retention_period
            ),
        )


class QueueRequest(Shape, omit_defaults=True):
    """A create, replace or edit of a queue. ``jurisdiction`` is Cloudflare's, and refused when
    given: a caller asking for data residency must not believe it got it."""

    queue_name: str | None = None
    settings: QueueSettingsChange = msgspec.field(default_factory=QueueSettingsChange)
    jurisdiction: str | None = None


class ConsumerSettingsChange(Shape, omit_defaults=True):
    batch_size: int | None = None
    max_retries: int | None = None
    max_wait_time_ms: int | None = None
    # null is a value here (no limit), so "not given" is told apart from it.
    max_concurrency: int | UnsetType | None = UNSET
    retry_delay: int | None = None
    visibility_timeout_ms: int | None = None

    def over(self, base: model.ConsumerSettings) -> model.ConsumerSettings:
        def pick(given: int | None, default: int) -> int:
            return default if given is None else given

        return model.ConsumerSettings(
            batch_size=pick(self.batch_size, base.batch_size),
            max_retries=pick(self.max_retries, base.max_retries),
            max_wait_time_ms=pick(self.max_wait_time_ms, base.max_wait_time_ms),
            max_concurrency=_given(self.max_concurrency, base.max_concurrency),
            retry_delay=pick(self.retry_delay, base.retry_delay),
            visibility_timeout_ms=pick(self.visibility_timeout_ms, base.visibility_timeout_ms),
        )


class ConsumerRequest(Shape, omit_defaults=True):
    """An add or replace of a consumer. wrangler's `consumer add` also sends its --env as
    ``environment_name`` ("" without one): accepted, and meaningless here (a Conveyor deployment has
    no Worker environments)."""

    type: str | None = None
    script_name: str | None = None
    script: str | None = None
    environment_name: str | None = None
    dead_letter_queue: str | None = None
    settings: ConsumerSettingsChange = msgspec.field(default_factory=ConsumerSettingsChange)


def consumer_request(type: str, script_name: str, settings: model.ConsumerSettings, dlq: str) -> ConsumerRequest:
    """What the remote client sends to add or replace a consumer."""
    return ConsumerRequest(
        type=type,
        script_name=script_name or None,
        dead_letter_queue=dlq,
        settings=ConsumerSettingsChange(**dataclasses.asdict(settings)),
    )


def queue_request(name: str | None, s: model.QueueSettings) -> QueueRequest:
    """What the remote client sends to create a queue or replace its settings."""
    return QueueRequest(
        queue_name=name, settings=QueueSettingsChange(s.delivery_delay, s.delivery_paused, s.message_retention_period)
    )


class PurgeRequest(Shape):
    delete_messages_permanently: bool | None = None


def _given(value: Any, default: Any) -> Any:
    return default if value is UNSET else value
