"""The rescuer: a coordinator service that sends a wake-up again for instances whose message was
lost (a message dropped after its deliveries ran out, a queue purged by hand).

An instance is rescued when it is overdue by ``GRACE_SECONDS`` — waiting past its wake time,
queued for that long, or running without a change for that long — and its workflow's internal
queue holds no message at all: then nothing can advance it (a live run holds its message leased
until the run has stored its end, so a running instance with an empty queue has no run). A running
one is first queued again under a new epoch, so a run that somehow went on could store nothing.
A wake-up sent for nothing is harmless (a message for an instance that is not due or
already running is acked without running anything); a workflow no worker runs keeps its one
message, so it gets no more.
"""

from __future__ import annotations

import logging

from conveyor.engine.accounts import qualify
from conveyor.engine.base import Engine
from conveyor.errors import QueueNotFound
from conveyor.workflows.execution import queue_name, send_wake
from conveyor.workflows.store import WorkflowStore

log = logging.getLogger("conveyor.workflows")

SERVICE = "workflow-rescue"
INTERVAL_SECONDS = 30.0
GRACE_SECONDS = 300.0
BATCH = 500


def rescue_overdue(store: WorkflowStore, engine: Engine) -> int:
    """Wake overdue instances whose internal queue is empty; ``engine`` is the deployment-wide
    (raw) engine. Returns how many were woken."""
    now = engine.clock.now_ms()
    woken = 0
    empty: dict[tuple[str, str], str | None] = {}
    for row in store.overdue(now - round(GRACE_SECONDS * 1000), BATCH):
        key = (row.account, row.workflow)
        if key not in empty:
            empty[key] = _empty_queue(engine, row.account, row.workflow)
        queue_id = empty[key]
        if queue_id is None:
            continue
        if row.status in ("running", "waitingForPause") and not store.requeue_orphan(
            row.account, row.workflow, row.id, row.epoch, now
        ):
            continue
        send_wake(engine, queue_id, row.id, None)
        woken += 1
    if woken:
        log.warning("workflow rescue: woke %d overdue instances whose wake-up message was lost", woken)
    return woken


def _empty_queue(engine: Engine, account: str, workflow: str) -> str | None:
    """The id of the workflow's internal queue if it holds no message, else None."""
    name = qualify(account, queue_name(workflow)) if account else queue_name(workflow)
    try:
        queue_id = engine.get_queue(name).queue_id
    except QueueNotFound:
        return None
    return queue_id if engine.metrics(queue_id).backlog_count == 0 else None
