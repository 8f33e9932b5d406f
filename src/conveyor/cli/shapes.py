"""The JSON the CLI prints: Cloudflare's object shapes, the very ones the REST API answers with
(:mod:`conveyor.shapes`), so scripts written against ``wrangler`` or the API read the same keys.

One deliberate difference: a message ``body`` is its decoded value (a JSON value for ``json``, a
string for ``text``, base64 for ``bytes``), not Cloudflare's base64 wire string — it is for scripts.
"""

from __future__ import annotations

import base64
from typing import Any

from conveyor.model import PulledMessage
from conveyor.shapes import consumer as consumer_json
from conveyor.shapes import counters as counters_json
from conveyor.shapes import metrics as metrics_json
from conveyor.shapes import queue as queue_json

__all__ = ["consumer_json", "counters_json", "message_json", "metrics_json", "queue_json"]


def body_json(body: Any, content_type: str) -> Any:
    if content_type == "bytes":
        return base64.b64encode(body).decode("ascii")
    return body


def message_json(m: PulledMessage) -> dict[str, Any]:
    return {
        "id": m.id,
        "body": body_json(m.body, m.content_type),
        "attempts": m.attempts,
        "lease_id": m.lease_id,
        "timestamp_ms": m.timestamp_ms,
        "metadata": {"CF-Content-Type": m.content_type},
    }
