"""Catalog rows, as both engines' catalogs read and write them: the same columns, the same named
parameters (each catalog's own ``.sql`` file spells the statements)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from conveyor.ids import iso_now
from conveyor.model import ConsumerInfo, ConsumerSettings, ConsumerType, QueueSettings


def queue_parameters(queue_id: str, settings: QueueSettings) -> dict[str, Any]:
    """The parameters of ``insert_queue`` (with ``name`` added) and ``update_queue``."""
    return {
        "queue": queue_id,
        "now": iso_now(),
        "delay": settings.delivery_delay,
        "paused": settings.delivery_paused,
        "retention": settings.message_retention_period,
    }


def consumer_settings_parameters(consumer_id: str, settings: ConsumerSettings, dlq: str) -> dict[str, Any]:
    """The parameters of ``update_consumer``."""
    return {"consumer": consumer_id, "dlq": dlq, "settings": json.dumps(asdict(settings))}


def consumer_parameters(
    consumer_id: str, queue_id: str, type: ConsumerType, script_name: str, settings: ConsumerSettings, dlq: str
) -> dict[str, Any]:
    """The parameters of ``insert_consumer``."""
    return consumer_settings_parameters(consumer_id, settings, dlq) | {
        "queue": queue_id,
        "type": type,
        "script": script_name,
        "now": iso_now(),
    }


def consumer_from_row(row: tuple[Any, ...]) -> ConsumerInfo:
    """A consumer from its catalog row as both engines select it: (consumer_id, queue_id, queue
    name, type, script_name, created_on, dead_letter_queue, settings as JSON)."""
    return ConsumerInfo(
        consumer_id=row[0],
        queue_id=row[1],
        queue_name=row[2],
        type=row[3],
        script_name=row[4],
        created_on=row[5],
        dead_letter_queue=row[6],
        settings=ConsumerSettings(**json.loads(row[7])),
    )
