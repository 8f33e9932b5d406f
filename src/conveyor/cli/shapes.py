"""The JSON the CLI prints: Cloudflare's object shapes (see ``reference/cloudflare-queues.md``), so
scripts written against ``wrangler`` or the REST API read the same keys.

One deliberate difference: a message ``body`` is its decoded value (a JSON value for ``json``, a
string for ``text``, base64 for ``bytes``), not Cloudflare's base64 wire string — it is for scripts.
"""

from __future__ import annotations

import base64
from typing import Any

from conveyor.model import ConsumerInfo, Counters, Metrics, PulledMessage, QueueInfo


def consumer_json(c: ConsumerInfo) -> dict[str, Any]:
    s = c.settings
    settings: dict[str, Any]
    if c.type == "worker":
        settings = {
            "batch_size": s.batch_size,
            "max_retries": s.max_retries,
            "max_wait_time_ms": s.max_wait_time_ms,
            "max_concurrency": s.max_concurrency,
            "retry_delay": s.retry_delay,
        }
    else:
        settings = {
            "batch_size": s.batch_size,
            "max_retries": s.max_retries,
            "retry_delay": s.retry_delay,
            "visibility_timeout_ms": s.visibility_timeout_ms,
        }
    return {
        "consumer_id": c.consumer_id,
        "queue_id": c.queue_id,
        "queue_name": c.queue_name,
        "type": c.type,
        # Both names, as the REST API sends them: wrangler reads one, the SDK the other.
        "script_name": c.script_name,
        "script": c.script_name,
        "created_on": c.created_on,
        "dead_letter_queue": c.dead_letter_queue,
        "settings": settings,
    }


def queue_json(q: QueueInfo) -> dict[str, Any]:
    return {
        "queue_id": q.queue_id,
        "queue_name": q.queue_name,
        "created_on": q.created_on,
        "modified_on": q.modified_on,
        "producers": [],
        "producers_total_count": 0,
        "consumers": [consumer_json(c) for c in q.consumers],
        "consumers_total_count": len(q.consumers),
        "settings": {
            "delivery_delay": q.settings.delivery_delay,
            "delivery_paused": q.settings.delivery_paused,
            "message_retention_period": q.settings.message_retention_period,
        },
    }


def metrics_json(m: Metrics) -> dict[str, int]:
    return {
        "backlog_count": m.backlog_count,
        "backlog_bytes": m.backlog_bytes,
        "oldest_message_timestamp_ms": m.oldest_message_timestamp_ms,
    }


def counters_json(c: Counters) -> dict[str, int]:
    return {
        "sent": c.sent,
        "acked": c.acked,
        "retried": c.retried,
        "dead_lettered": c.dead_lettered,
        "expired": c.expired,
        "dropped": c.dropped,
        "in_flight": c.in_flight,
    }


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
