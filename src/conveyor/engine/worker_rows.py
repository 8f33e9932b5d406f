"""The worker registry's rows, as both engines store them: one row per worker process, its runs as JSON.

A worker records itself every HEARTBEAT_SECONDS; an entry not heard of for EXPIRY_MS is dead
(SIGKILLed, or its host gone) and is deleted the next time the registry is written or read.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from conveyor.errors import InvalidRequest
from conveyor.model import WorkerEntry, WorkerRun

HEARTBEAT_SECONDS = 5.0
EXPIRY_MS = 30_000


def record_parameters(entry: WorkerEntry, registered_by: str, now_ms: int) -> dict[str, Any]:
    """The named parameters of the ``record`` query (``workers.sql`` of each engine)."""
    return {
        "worker": entry.worker_id,
        "by": registered_by,
        "host": entry.host,
        "pid": entry.pid,
        "started": entry.started_ms,
        "now": now_ms,
        "runs": json.dumps([asdict(run) for run in entry.runs]),
    }


def worker_id_taken(entry: WorkerEntry) -> InvalidRequest:
    """The refusal of a ``record`` whose worker id another registrant holds."""
    return InvalidRequest(f"worker id {entry.worker_id!r} is taken; a worker picks a new random id")


def worker_from_row(row: tuple[Any, ...]) -> WorkerEntry:
    """(worker_id, host, pid, started_ms, heartbeat_ms, runs as JSON) -> the entry."""
    runs = tuple(WorkerRun(**run) for run in json.loads(row[5]))
    return WorkerEntry(row[0], row[1], int(row[2]), int(row[3]), int(row[4]), runs)
