"""Retention of finished instances: a coordinator service deletes those past their workflow's
retention (3 days complete, 7 days errored or terminated by default), by the engine's clock."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from conveyor.broker.coordinator import Coordinator
from conveyor.workflows.client import workflow_store

if TYPE_CHECKING:
    from conveyor.client.sync import Conveyor

log = logging.getLogger("conveyor.workflows")

SERVICE = "workflow-retention"
INTERVAL_SECONDS = 60.0


def prune_finished(client: Conveyor) -> int:
    """Delete every account's finished instances past retention now; returns the count."""
    count = workflow_store(client).prune(client.engine.clock.now_ms())
    if count:
        log.info("workflow retention: deleted %d finished instances", count)
    return count


def add_retention_service(coordinator: Coordinator, client: Conveyor) -> None:
    coordinator.add_service(SERVICE, INTERVAL_SECONDS, lambda: prune_finished(client))
