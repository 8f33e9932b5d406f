"""Cloudflare's object shapes: Queue, Consumer, messages and metrics as the v4 API writes them.

The server answers with them and the CLI's ``--json`` prints them, so they live outside
``conveyor.server``: the CLI runs without the ``server`` extra.
"""

from __future__ import annotations

import base64
from typing import Any

from conveyor.model import ConsumerInfo, Counters, Metrics, QueueInfo, StoredMessage


def metrics(m: Metrics) -> dict[str, int]:
    return {
        "backlog_count": m.backlog_count,
        "backlog_bytes": m.backlog_bytes,
        "oldest_message_timestamp_ms": m.oldest_message_timestamp_ms,
    }


def consumer(c: ConsumerInfo) -> dict[str, Any]:
    s = c.settings
    out: dict[str, Any] = {
        "consumer_id": c.consumer_id,
        "queue_id": c.queue_id,
        "queue_name": c.queue_name,
        "type": c.type,
        "created_on": c.created_on,
        "dead_letter_queue": c.dead_letter_queue,
    }
    if c.type == "worker":
        # wrangler reads `script`, the Python SDK `script_name`: send both.
        out["script_name"] = out["script"] = c.script_name
        out["settings"] = {
            "batch_size": s.batch_size,
            "max_retries": s.max_retries,
            "max_wait_time_ms": s.max_wait_time_ms,
            "max_concurrency": s.max_concurrency,
            "retry_delay": s.retry_delay,
            # Conveyor's own: the lease a push worker holds (and renews) while its handler runs.
            "visibility_timeout_ms": s.visibility_timeout_ms,
        }
    else:
        out["settings"] = {
            "batch_size": s.batch_size,
            "max_retries": s.max_retries,
            "retry_delay": s.retry_delay,
            "visibility_timeout_ms": s.visibility_timeout_ms,
        }
    return out


def queue(q: QueueInfo) -> dict[str, Any]:
    return {
        "queue_id": q.queue_id,
        "queue_name": q.queue_name,
        "created_on": q.created_on,
        "modified_on": q.modified_on,
        "producers": [],
        "producers_total_count": 0,
        "consumers": [consumer(c) for c in q.consumers],
        "consumers_total_count": len(q.consumers),
        "shards": q.shards,
        "settings": {
            "delivery_delay": q.settings.delivery_delay,
            "delivery_paused": q.settings.delivery_paused,
            "message_retention_period": q.settings.message_retention_period,
        },
    } | ({"storage_error": q.storage_error} if q.storage_error is not None else {})


def message_body(m: StoredMessage) -> str:
    """Cloudflare's pulled ``body``: UTF-8 for text, base64 of the stored bytes for json and bytes."""
    if m.content_type == "text":
        return m.body.decode()
    return base64.b64encode(m.body).decode()


def _message(m: StoredMessage) -> dict[str, Any]:
    return {
        "id": m.id,
        "body": message_body(m),
        "attempts": m.attempts,
        "timestamp_ms": m.timestamp_ms,
        "metadata": {"CF-Content-Type": m.content_type},
    }


def pulled(m: StoredMessage) -> dict[str, Any]:
    """A leased message: acked or retried by its ``lease_id``."""
    return {**_message(m), "lease_id": m.lease_id}


def peeked(m: StoredMessage) -> dict[str, Any]:
    """A message read without a lease: ``ref`` names it (Cloudflare's peek answers with one)."""
    return {**_message(m), "ref": m.id}


def counters(c: Counters) -> dict[str, int]:
    """Conveyor's lifetime counters of a queue (no Cloudflare equivalent)."""
    return {
        "sent": c.sent,
        "acked": c.acked,
        "retried": c.retried,
        "dead_lettered": c.dead_lettered,
        "expired": c.expired,
        "dropped": c.dropped,
        "in_flight": c.in_flight,
    }
