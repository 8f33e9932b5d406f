"""Catalog rows to model objects, for the engines whose catalogs select the same columns."""

from __future__ import annotations

import json
from typing import Any

from conveyor.model import ConsumerInfo, ConsumerSettings


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
