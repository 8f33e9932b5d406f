"""Workflow records made without code: ``cv.put_workflow`` (``PUT /workflows/{name}``, wrangler's
deploy) and ``cv.list_workflows``.

A workflow exists once a worker registers its code or a PUT creates its record. Settings given by
a PUT (schedules, concurrency, step limit, retention) override the code's defaults, as wrangler's
deploy config does; what a PUT leaves out stays the code's. A worker applies the settings in force
when it starts. Instances of a workflow that no worker runs stay ``queued``
(:meth:`Workflow.has_worker` says so).

>>> wf = cv.put_workflow("download-package", max_steps=500, success_retention="1 day")
>>> wf.record.settings.max_steps
500
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from conveyor import limits
from conveyor.workflows.client import Workflow, check_workflow_name, workflow_store
from conveyor.workflows.durations import parse_duration
from conveyor.workflows.errors import InvalidStepConfig
from conveyor.workflows.model import WorkflowOverrides
from conveyor.workflows.schedules import check_cron
from conveyor.workflows.store import WorkflowStore

if TYPE_CHECKING:
    from conveyor.client.sync import Conveyor

MAX_STEPS_LIMIT = 1_000_000
MAX_RETENTION_MS = 10 * 365 * 86_400_000
MAX_SCHEDULES = 100
MAX_SCRIPT_NAME = 255


def check_overrides(overrides: WorkflowOverrides) -> WorkflowOverrides:
    """``overrides`` if every setting in it is within its range, else ``InvalidStepConfig`` naming it."""
    for what in ("class_name", "script_name"):
        value = getattr(overrides, what)
        if value is not None and not (isinstance(value, str) and 1 <= len(value) <= MAX_SCRIPT_NAME):
            raise InvalidStepConfig(f"{what} is {value!r}; it must be 1 to {MAX_SCRIPT_NAME} characters")
    if overrides.schedules is not None:
        if len(overrides.schedules) > MAX_SCHEDULES:
            raise InvalidStepConfig(f"{len(overrides.schedules)} schedules; the limit is {MAX_SCHEDULES}")
        for cron in overrides.schedules:
            check_cron(cron)
    _whole("max_steps (limits.steps)", overrides.max_steps, 1, MAX_STEPS_LIMIT)
    _whole("concurrency (concurrency.limit)", overrides.concurrency, 1, limits.MAX_CONCURRENCY)
    _whole("the success retention", overrides.success_retention_ms, 0, MAX_RETENTION_MS, " ms")
    _whole("the error retention", overrides.error_retention_ms, 0, MAX_RETENTION_MS, " ms")
    return overrides


def _whole(what: str, value: object, low: int, high: int, unit: str = "") -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidStepConfig(f"{what} is {value!r}{unit}; it must be a whole number from {low} to {high}{unit}")


def retention_ms(value: float | str | None, what: str) -> int | None:
    """Seconds (or ``"5 minutes"``) as milliseconds; None stays None."""
    return None if value is None else round(parse_duration(value, what) * 1000)


def put_workflow(
    client: Conveyor,
    name: str,
    *,
    class_name: str | None = None,
    script_name: str | None = None,
    schedules: Sequence[str] | None = None,
    max_steps: int | None = None,
    concurrency: int | None = None,
    success_retention: float | str | None = None,
    error_retention: float | str | None = None,
) -> Workflow:
    """Create the workflow's record or replace the settings a previous put gave (see the module
    docstring); the workflow's handle."""
    check_workflow_name(name)
    if isinstance(schedules, str):
        schedules = [schedules]
    overrides = check_overrides(
        WorkflowOverrides(
            class_name=class_name,
            script_name=script_name,
            schedules=None if schedules is None else tuple(schedules),
            max_steps=max_steps,
            concurrency=concurrency,
            success_retention_ms=retention_ms(success_retention, "success_retention"),
            error_retention_ms=retention_ms(error_retention, "error_retention"),
        )
    )
    return put_overrides(client, name, overrides)


def put_overrides(
    client: Conveyor, name: str, overrides: WorkflowOverrides, store: WorkflowStore | None = None
) -> Workflow:
    """:func:`put_workflow` of checked ``overrides`` (through ``store``: a server's own)."""
    store = store if store is not None else workflow_store(client)
    now = client.engine.clock.now_ms()
    record = store.put_workflow_overrides(client.deployment.account, check_workflow_name(name), overrides, now)
    return Workflow(client, record, store)


def list_workflows(client: Conveyor, store: WorkflowStore | None = None) -> list[Workflow]:
    """The account's workflows, by name."""
    store = store if store is not None else workflow_store(client)
    return [Workflow(client, r, store) for r in store.list_workflows(client.deployment.account)]
