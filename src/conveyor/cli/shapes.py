"""The JSON the CLI prints: Cloudflare's object shapes, the very structs the REST API answers with
(:mod:`conveyor.wire`), so scripts written against ``wrangler`` or the API read the same keys.

One deliberate difference: a message ``body`` is its decoded value (a JSON value for ``json``, a
string for ``text``, base64 for ``bytes``), not Cloudflare's base64 wire string — it is for scripts.
"""

from __future__ import annotations

import base64
from typing import Any

from conveyor import wire
from conveyor.model import ConsumerInfo, Counters, Metrics, PulledMessage, QueueInfo

__all__ = ["consumer_json", "counters_json", "message_json", "metrics_json", "queue_json"]


def queue_json(q: QueueInfo) -> dict[str, Any]:
    return wire.to_builtins(wire.queue(q))  # type: ignore[no-any-return]


def consumer_json(c: ConsumerInfo) -> dict[str, Any]:
    return wire.to_builtins(wire.consumer(c))  # type: ignore[no-any-return]


def metrics_json(m: Metrics) -> dict[str, Any]:
    return wire.to_builtins(wire.metrics(m))  # type: ignore[no-any-return]


def counters_json(c: Counters) -> dict[str, Any]:
    return wire.to_builtins(wire.counters(c))  # type: ignore[no-any-return]


def body_json(body: Any, content_type: str) -> Any:
    if content_type == "bytes":
        return base64.b64encode(body).decode("ascii")
    return body


def message_json(m: PulledMessage) -> dict[str, Any]:
    pulled = wire.to_builtins(
        wire.PulledMessage(
            id=m.id,
            body="",
            attempts=m.attempts,
            timestamp_ms=m.timestamp_ms,
            metadata=wire.MessageMetadata(m.content_type, m.traceparent),
            lease_id=m.lease_id,
        )
    )
    return {**pulled, "body": body_json(m.body, m.content_type)}
