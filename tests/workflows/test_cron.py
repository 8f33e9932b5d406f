"""Cron triggers: a tick starts exactly one instance however many coordinators race for it, ticks
missed while nothing ran start one instance, and ``event.schedule`` is the tick."""

from __future__ import annotations

import datetime
import threading

import pytest

import conveyor
from conveyor.workflows.client import workflow_store
from conveyor.workflows.databases import open_store
from conveyor.workflows.schedules import CronService, latest_tick, tick_instance_id
from tests.conformance.support import FakeClock
from tests.waiting import wait_for
from tests.workflows.support import deployment_side, running, settled

# 2026-12-03 16:35:00 UTC
START_MS = int(datetime.datetime(2026, 12, 3, 16, 35, tzinfo=datetime.UTC).timestamp() * 1000)


@pytest.fixture
def clock(cv: conveyor.Conveyor) -> FakeClock:
    fake = FakeClock(START_MS)
    cv.engine.clock = fake
    return fake


def _service(cv: conveyor.Conveyor) -> CronService:
    """A coordinator's cron service on ``cv``'s deployment (a new one is a fail-over's new leader)."""
    side = deployment_side(cv)
    raw = side.engine.deployment_engine()
    assert raw is not None
    return CronService(lambda: workflow_store(side), raw)


def _register(app: conveyor.App) -> None:
    app.start()
    app.stop(grace=1)


def _ids(cv: conveyor.Conveyor, workflow: str) -> list[str]:
    return [i.id for i in cv.workflow(workflow).list_instances(per_page=100).instances]


def test_a_tick_starts_one_instance_whose_event_schedule_is_the_tick(cv, app, clock) -> None:
    @app.workflow("every-ten", schedules=["*/10 * * * *"])
    def run(event, step):
        return {"schedule": event.schedule.isoformat(), "payload": event.payload}

    _register(app)
    service = _service(cv)
    assert service() == 0, "16:35: the 16:30 tick came before the workflow was registered"
    clock.advance(4 * 60 + 59)
    assert service() == 0, "16:39:59"
    clock.advance(1)
    assert service() == 1, "16:40:00"
    assert service() == 0 and _service(cv)() == 0, "the tick is started once, by any coordinator"
    assert _ids(cv, "every-ten") == ["cron-20261203T1640Z"]
    with running(app):
        status = settled(cv.workflow("every-ten").get("cron-20261203T1640Z"), "complete")
    assert status.output == {"schedule": "2026-12-03T16:40:00+00:00", "payload": None}


def test_ticks_missed_while_nothing_ran_start_one_instance_on_recovery(cv, app, clock) -> None:
    @app.workflow("hourly", schedules=["0 * * * *", "30 9 * * *"])
    def run(event, step):
        return event.schedule.isoformat()

    _register(app)
    clock.advance(3 * 3600)  # 19:35: the 17:00, 18:00 and 19:00 ticks were missed
    service = _service(cv)
    assert service() == 1
    assert service() == 0
    assert _ids(cv, "hourly") == ["cron-20261203T1900Z"]
    clock.advance(25 * 60)  # 20:00
    assert service() == 1
    assert _ids(cv, "hourly") == ["cron-20261203T1900Z", "cron-20261203T2000Z"]


def test_coordinators_racing_for_a_tick_start_exactly_one_instance(cv, app, clock) -> None:
    @app.workflow("raced", schedules=["*/5 * * * *"])
    def run(event, step):
        return None

    _register(app)
    clock.advance(5 * 60)
    side = deployment_side(cv)
    raw = side.engine.deployment_engine()
    assert raw is not None
    # Each racer has its own store (its own connections), as coordinators of other processes do.
    stores = [open_store(side.deployment, clock) for _ in range(4)]
    started: list[int] = []
    barrier = threading.Barrier(len(stores))

    def race(index: int) -> None:
        service = CronService(lambda: stores[index], raw)
        barrier.wait()
        started.append(service())

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in stores:
        store.close()
    assert sorted(started) == [0, 0, 0, 1]
    assert _ids(cv, "raced") == ["cron-20261203T1640Z"]


def test_an_instance_created_by_hand_has_no_schedule(cv, app, clock) -> None:
    @app.workflow("by-hand", schedules=["*/10 * * * *"])
    def run(event, step):
        return event.schedule

    with running(app):
        assert settled(cv.workflow("by-hand").create(), "complete").output is None


def test_a_started_tick_whose_wake_up_was_lost_is_woken_by_the_next_coordinator(cv, app, clock) -> None:
    @app.workflow("lost-wake", schedules=["*/10 * * * *"])
    def run(event, step):
        return "ran"

    _register(app)
    clock.advance(5 * 60)
    side = deployment_side(cv)
    store = workflow_store(side)
    from conveyor.workflows.model import NewInstance

    tick = latest_tick(["*/10 * * * *"], clock.now_ms())
    assert tick is not None
    # A coordinator that died between starting the tick and sending its wake-up:
    assert store.start_tick(
        cv.deployment.account, "lost-wake", tick, NewInstance(tick_instance_id(tick), "null", "0" * 32), clock.now_ms()
    )
    assert _service(cv)() == 0, "the tick is started; the new coordinator only wakes it"
    with running(app):
        assert settled(cv.workflow("lost-wake").get("cron-20261203T1640Z"), "complete").output == "ran"


def test_a_workflow_without_schedules_any_more_starts_nothing(cv, app, clock) -> None:
    @app.workflow("dropped", schedules=["* * * * *"])
    def first(event, step):
        return None

    _register(app)
    again = conveyor.App(cv)
    again.workflow("dropped")(first)
    _register(again)
    clock.advance(120)
    assert _service(cv)() == 0
    assert _ids(cv, "dropped") == []


# Over HTTP the app has no coordinator of its own (the server's runs the ticks), so the embedded engines.
@pytest.mark.parametrize("cv", ["postgres", "sqlite"], indirect=True)
def test_the_coordinator_of_a_running_app_starts_the_ticks(cv, app, clock) -> None:
    @app.workflow("by-coordinator", schedules=["* * * * *"])
    def run(event, step):
        return event.schedule.isoformat()

    with running(app):
        clock.advance(60)
        inst = wait_for(lambda: _first(cv, "by-coordinator"), timeout=15, what="the coordinator to start the tick")
        assert settled(inst, "complete").output == "2026-12-03T16:36:00+00:00"


def _first(cv: conveyor.Conveyor, workflow: str) -> conveyor.workflows.Instance | None:
    ids = _ids(cv, workflow)
    return cv.workflow(workflow).get(ids[0]) if ids else None


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("*/10 * * *", "has 4 fields; a cron expression has 5"),
        ("* * * * * *", "has 6 fields"),
        ("61 * * * *", "Bad minute"),
        ("* 24 * * *", "Bad hour"),
        ("0 0 31 2 *", "Bad day-of-month"),
        ("0 0 * foo *", "Bad month"),
        ("*/0 * * * *", "Bad minute"),
        (10, "is not a cron expression string"),
    ],
)
def test_a_bad_cron_expression_is_refused_when_the_workflow_is_declared(cv, app, expression, problem) -> None:
    with pytest.raises(conveyor.workflows.InvalidStepConfig) as refused:
        app.workflow("bad-cron", schedules=[expression])(lambda event, step: None)
    assert problem in str(refused.value) and repr(expression) in str(refused.value)
    assert app.workflows == []


def test_latest_tick_is_at_or_before_now() -> None:
    assert latest_tick(["*/10 * * * *"], START_MS) == START_MS - 5 * 60_000
    assert latest_tick(["*/5 * * * *"], START_MS) == START_MS
    assert latest_tick(["*/5 * * * *"], START_MS + 999) == START_MS
    assert latest_tick(["0 0 * * mon", "*/10 * * * *"], START_MS) == START_MS - 5 * 60_000
    assert tick_instance_id(START_MS) == "cron-20261203T1635Z"
