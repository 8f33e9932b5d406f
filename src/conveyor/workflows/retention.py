"""The workflows' coordinator services: retention of finished instances (deleted past their
workflow's retention, 3 days complete and 7 days errored or terminated by default, by the engine's
clock), the rescuer (:mod:`conveyor.workflows.rescue`), cron triggers
(:mod:`conveyor.workflows.schedules`) and the counters' owed wake-ups
(:mod:`conveyor.workflows.counter`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from conveyor.broker.coordinator import Coordinator
from conveyor.workflows.client import workflow_store
from conveyor.workflows.counter import INTERVAL_SECONDS as WAKEUP_INTERVAL
from conveyor.workflows.counter import SERVICE as WAKEUP_SERVICE
from conveyor.workflows.counter import send_owed_wakeups
from conveyor.workflows.rescue import INTERVAL_SECONDS as RESCUE_INTERVAL
from conveyor.workflows.rescue import SERVICE as RESCUE_SERVICE
from conveyor.workflows.rescue import rescue_overdue
from conveyor.workflows.schedules import INTERVAL_SECONDS as CRON_INTERVAL
from conveyor.workflows.schedules import SERVICE as CRON_SERVICE
from conveyor.workflows.schedules import CronService

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


def add_workflow_services(coordinator: Coordinator, client: Conveyor) -> None:
    """Retention, the rescuer, cron triggers and owed wake-ups, on the coordinator of ``client``'s deployment. The
    store opens when a service first runs, so a process that never leads (a worker of a server)
    opens none."""
    coordinator.add_service(SERVICE, INTERVAL_SECONDS, lambda: prune_finished(client))
    coordinator.add_service(
        RESCUE_SERVICE, RESCUE_INTERVAL, lambda: rescue_overdue(workflow_store(client), coordinator.engine)
    )
    coordinator.add_service(
        CRON_SERVICE, CRON_INTERVAL, CronService(lambda: workflow_store(client), coordinator.engine)
    )
    coordinator.add_service(
        WAKEUP_SERVICE, WAKEUP_INTERVAL, lambda: send_owed_wakeups(workflow_store(client), coordinator.engine)
    )
