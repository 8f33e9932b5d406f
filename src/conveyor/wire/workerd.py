"""The send side of workerd's queue binding (``/workerd``): workerd's own camelCase shapes, not
Cloudflare's REST API. The binding reads its batch leniently, field by field, as workerd sends it,
so its request struct describes the body and does not refuse fields beyond it."""

from __future__ import annotations

import msgspec

from conveyor import model
from conveyor.wire.decoding import Shape


class BindingMetrics(Shape):
    backlog_count: int = msgspec.field(name="backlogCount")
    backlog_bytes: int = msgspec.field(name="backlogBytes")
    oldest_message_timestamp: int = msgspec.field(name="oldestMessageTimestamp")


def binding_metrics(m: model.Metrics) -> BindingMetrics:
    return BindingMetrics(m.backlog_count, m.backlog_bytes, m.oldest_message_timestamp_ms)


class BindingSendMetadata(Shape):
    metrics: BindingMetrics


class BindingSent(Shape):
    metadata: BindingSendMetadata


def binding_sent(m: model.Metrics) -> BindingSent:
    return BindingSent(BindingSendMetadata(binding_metrics(m)))


class BindingMessage(msgspec.Struct):
    """One message of a batch: its serialised body in base64, its format, its delay."""

    body: str
    content_type: str | None = msgspec.field(default=None, name="contentType")
    delay_secs: int | None = msgspec.field(default=None, name="delaySecs")


class BindingBatch(msgspec.Struct):
    messages: list[BindingMessage]
