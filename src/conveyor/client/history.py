"""A queue's recorded history, wherever the client is: read from the deployment's history store
(SQLite, PostgreSQL) or asked of the server (``connect("http://...")``).

>>> queue_history(cv, "emails", minutes=60)[-1]["backlog"]
42
"""

from __future__ import annotations

from typing import Any

from conveyor.client.http import RemoteEngine
from conveyor.client.sync import Conveyor
from conveyor.engine.history import history_rows, open_history


def queue_history(cv: Conveyor, name: str, minutes: int) -> list[dict[str, Any]]:
    """The points of queue ``name`` over the last ``minutes``, oldest first (``history_rows``'
    shape); ``QueueNotFound`` for a queue that does not exist."""
    info = cv.queue(name).info()
    engine = cv.engine
    if isinstance(engine, RemoteEngine):
        return engine.queue_history(info.queue_id, minutes)
    deployment = engine.deployment()
    store = open_history(deployment)
    try:
        since = engine.clock.now_ms() - minutes * 60_000
        qualified = f"{deployment.account}/{name}" if deployment.account else name
        return history_rows(store.of_queue(qualified, since))
    finally:
        store.close()
