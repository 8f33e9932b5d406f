"""Cron triggers: ``@app.workflow(name, schedules=["*/10 * * * *"])`` starts one instance of the
workflow on every tick of any of its schedules, across all workers (UTC, as Cloudflare's cron
triggers).

An expression has five fields (minute hour day-of-month month day-of-week), each ``*``, a number,
a range ``a-b``, a list ``a,b`` and steps ``*/n`` or ``a-b/n``; months and week days also by their
English three-letter names (parsing and stepping by the ``cronsim`` library). It is checked when
the workflow is declared.

The coordinator's ``workflow-cron`` service (:class:`CronService`) starts the instances. Each
scheduled workflow has a row with the last tick it started (``workflow_schedules``, begun at the
workflow's first registration); a round takes every workflow whose latest tick is later and, in one
transaction, moves the row to that tick and creates the instance (:meth:`WorkflowStore.start_tick`),
so a tick starts one instance however many coordinators race for it (a fail-over, two leaders for a
moment, a clock behind). Only the latest tick is started: ticks missed while nothing ran start one
instance on recovery, not one per missed tick. The instance's id is ``cron-`` and the tick
(``cron-20261203T1640Z``) and its ``event.schedule`` the tick as a datetime.

>>> check_cron("*/10 * * * *")
'*/10 * * * *'
"""

from __future__ import annotations

import datetime
import logging
import secrets
from collections.abc import Callable, Iterable

from cronsim import CronSim, CronSimError

from conveyor.engine.accounts import AccountEngine
from conveyor.engine.base import Engine
from conveyor.workflows.errors import InvalidStepConfig
from conveyor.workflows.execution import ensure_queue, send_wake
from conveyor.workflows.model import NewInstance, ScheduleRow
from conveyor.workflows.store import WorkflowStore

log = logging.getLogger("conveyor.workflows")

SERVICE = "workflow-cron"
# Ticks are whole minutes: a round every second starts an instance within about a second of its tick.
INTERVAL_SECONDS = 1.0
MAX_SCHEDULES = 100
FIELDS = "minute hour day-of-month month day-of-week"


def check_cron(expression: object) -> str:
    """``expression`` if it is a valid five-field cron expression, else ``InvalidStepConfig``
    naming what is wrong."""
    if not isinstance(expression, str):
        raise InvalidStepConfig(f"schedule {expression!r} is not a cron expression string")
    fields = expression.split()
    if len(fields) != 5:
        raise InvalidStepConfig(f"schedule {expression!r} has {len(fields)} fields; a cron expression has 5 ({FIELDS})")
    try:
        CronSim(" ".join(fields).upper(), _EPOCH)
    except CronSimError as exc:
        raise InvalidStepConfig(f"schedule {expression!r} is not a valid cron expression: {exc}") from None
    return expression


def latest_tick(expressions: Iterable[str], now_ms: int) -> int | None:
    """The latest tick (ms) at or before ``now_ms`` of any of ``expressions``; None if there is none."""
    # cronsim steps in whole seconds and, going back, from strictly before its start.
    start = datetime.datetime.fromtimestamp(now_ms // 1000 + 1, datetime.UTC)
    ticks = []
    for expression in expressions:
        try:
            tick = next(CronSim(" ".join(expression.split()).upper(), start, reverse=True))
        except (CronSimError, StopIteration):
            continue  # a record some other process wrote with a bad expression: it never ticks
        ticks.append(int(tick.timestamp()) * 1000)
    return max(ticks, default=None)


def tick_instance_id(tick_ms: int) -> str:
    """The id of the instance a tick starts: ``cron-20261203T1640Z``."""
    when = datetime.datetime.fromtimestamp(tick_ms / 1000, datetime.UTC)
    return "cron-" + when.strftime("%Y%m%dT%H%MZ")


_EPOCH = datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC)


class CronService:
    """The coordinator service that starts the instances of due ticks (``engine`` the deployment's
    raw engine, whose clock it reads). A round after this process became the service, or after a
    failed round, first wakes again the latest tick's instance of each workflow if it is still
    queued: a coordinator that died between the start and its wake-up left it without a message."""

    def __init__(self, store: Callable[[], WorkflowStore], engine: Engine) -> None:
        self._store = store
        self.engine = engine
        self._recheck = True
        self._views: dict[str, Engine] = {}

    def __call__(self) -> int:
        """One round; returns how many instances it started."""
        store = self._store()
        now = self.engine.clock.now_ms()
        rows = store.schedules()
        recheck, self._recheck = self._recheck, True
        if recheck:
            self._wake_unstarted(store, rows)
        started = 0
        for row in rows:
            tick = latest_tick(row.schedules, now)
            if tick is None or tick <= row.last_tick_ms:
                continue
            new = NewInstance(tick_instance_id(tick), "null", secrets.token_hex(16))
            instance = store.start_tick(row.account, row.workflow, tick, new, now)
            if instance is not None:
                send_wake(self.engine, self._queue(row), instance.id, None)
                started += 1
                log.info("workflow %s: started %s for its cron tick", row.workflow, instance.id)
        self._recheck = False
        return started

    def _wake_unstarted(self, store: WorkflowStore, rows: list[ScheduleRow]) -> None:
        for row in rows:
            instance = store.get_instance(row.account, row.workflow, tick_instance_id(row.last_tick_ms))
            if instance is not None and instance.status == "queued" and instance.epoch == 0:
                send_wake(self.engine, self._queue(row), instance.id, None)

    def _queue(self, row: ScheduleRow) -> str:
        """The id of the workflow's internal queue (made if missing: a workflow a PUT made may
        have had no worker yet)."""
        view = self._views.get(row.account)
        if view is None:
            view = self._views[row.account] = AccountEngine(self.engine, row.account) if row.account else self.engine
        return ensure_queue(view, row.workflow)
