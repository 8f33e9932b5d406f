"""``@app.workflow``: a workflow's definition, registered by the worker that runs it.

When the app starts, each definition writes the workflow's record (settings and version id), makes
sure its internal queue exists and becomes that queue's push consumer (batches of one message,
``concurrency`` as its ``max_concurrency``, ``DEFAULT_CONCURRENCY`` when it sets none), like any
``@app.consumer``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from conveyor import limits
from conveyor.consumer.dispatcher import ConsumerSpec
from conveyor.model import ConsumerSettings
from conveyor.workflows.client import check_workflow_name, workflow_store
from conveyor.workflows.counter import QUEUE_IDS, QueueIds
from conveyor.workflows.durations import parse_duration
from conveyor.workflows.errors import InvalidStepConfig
from conveyor.workflows.execution import WorkflowHandler, queue_name, version_id
from conveyor.workflows.model import DEFAULT_ERROR_RETENTION_MS, DEFAULT_SUCCESS_RETENTION_MS, WorkflowSettings
from conveyor.workflows.schedules import check_cron

if TYPE_CHECKING:
    from conveyor.client.sync import Conveyor

# A run may go on for long (a thousand steps in one delivery): the lease is renewed by heartbeat,
# and the handler's time limit is the queue's longest visibility timeout.
RUN_TIME_LIMIT = limits.MAX_VISIBILITY_TIMEOUT_MS / 1000
# A message whose handler failed (the store was unreachable) comes back after this.
REDELIVERY_DELAY = 1
# Runs of one workflow at once in a worker when the workflow sets no ``concurrency`` (a queue
# consumer's automatic cap is limits.MAX_CONCURRENCY). A run is Python on the process's one
# interpreter lock, writing to a store whose writes go one transaction at a time (workflows.db)
# or on a pool of this many connections (PostgreSQL): more runs than this only wait for those,
# and a parent whose 1,000 children ran 250 at once waited 4-30 ms for its turn among them after
# the last one ended (2-5 ms with 32). Steps that wait on I/O for long want a higher setting.
DEFAULT_CONCURRENCY = 32
RETENTION_SERVICE_INTERVAL = 60.0


@dataclasses.dataclass(frozen=True)
class WorkflowDefinition:
    name: str
    fn: Callable[..., Any]
    settings: WorkflowSettings
    visibility_timeout_ms: int

    def start(self, client: Conveyor) -> tuple[str, ConsumerSpec]:
        """Register the workflow; the internal queue's id and its consumer."""
        store = workflow_store(client)
        account = client.deployment.account
        record = store.put_workflow(
            account, self.name, self.settings, version_id(self.fn, self.settings), client.engine.clock.now_ms()
        )
        # In force: the code's settings under those a PUT gave (wrangler's deploy config).
        in_force = record.settings
        queue_id = store.internal_queue(account, self.name, client.engine)
        # A counter of this client that wakes an instance of the workflow finds its queue at once.
        client.component(QUEUE_IDS, QueueIds.open).remember(account, self.name, queue_id)
        handler = WorkflowHandler(self.fn, self.name, account, store, client.engine, queue_id, in_force)
        settings = ConsumerSettings(
            batch_size=1,
            max_retries=limits.MAX_RETRIES,
            max_wait_time_ms=0,
            max_concurrency=in_force.concurrency or DEFAULT_CONCURRENCY,
            retry_delay=REDELIVERY_DELAY,
            visibility_timeout_ms=self.visibility_timeout_ms,
        )
        # A delivery again is harmless (execution.py: a message for an instance that is not due or
        # is finished is acked without running anything), so the run's ack need not wait for a flush
        # of its own: the run's end was flushed before it.
        spec = ConsumerSpec(queue_name(self.name), handler, settings, None, RUN_TIME_LIMIT, durable_acks=False)
        return queue_id, spec


def define(
    name: str,
    fn: Callable[..., Any],
    *,
    schedules: Sequence[str] | None,
    max_steps: int,
    concurrency: int | None,
    success_retention: float | str | None,
    error_retention: float | str | None,
    visibility_timeout_ms: int,
) -> WorkflowDefinition:
    """A checked definition (every bad setting an error naming it)."""
    check_workflow_name(name)
    if not callable(fn):
        raise InvalidStepConfig(f"workflow {name!r}: {fn!r} is not a function")
    crons = tuple(check_cron(c) for c in (schedules or ()))
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or not 1 <= max_steps <= 1_000_000:
        raise InvalidStepConfig(f"max_steps is {max_steps!r}; it must be a whole number from 1 to 1000000")
    if concurrency is not None and (
        isinstance(concurrency, bool)
        or not isinstance(concurrency, int)
        or not 1 <= concurrency <= limits.MAX_CONCURRENCY
    ):
        raise InvalidStepConfig(
            f"concurrency is {concurrency!r}; it must be a whole number from 1 to {limits.MAX_CONCURRENCY}"
        )
    if (
        isinstance(visibility_timeout_ms, bool)
        or not isinstance(visibility_timeout_ms, int)
        or not (1 <= visibility_timeout_ms <= limits.MAX_VISIBILITY_TIMEOUT_MS)
    ):
        raise InvalidStepConfig(f"visibility_timeout_ms is {visibility_timeout_ms!r}")
    success_ms = _retention(success_retention, "success_retention", DEFAULT_SUCCESS_RETENTION_MS)
    error_ms = _retention(error_retention, "error_retention", DEFAULT_ERROR_RETENTION_MS)
    script = f"{fn.__module__}:{fn.__qualname__}"
    settings = WorkflowSettings(script, crons, max_steps, concurrency, success_ms, error_ms)
    return WorkflowDefinition(name, fn, settings, visibility_timeout_ms)


def _retention(value: float | str | None, what: str, default: int) -> int:
    return default if value is None else round(parse_duration(value, what) * 1000)
