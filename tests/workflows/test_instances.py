"""Instances: create (ids never reused), batches, listing, pause/resume/terminate/restart/delete,
and every refusal with its code, changing nothing."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import conveyor
from conveyor.workflows import InvalidInstanceId, InvalidWorkflowName, PayloadTooLarge
from conveyor.workflows.registration import DEFAULT_CONCURRENCY
from tests.waiting import wait_for
from tests.workflows.support import Ledger, advance, running, settled


def _register(app: conveyor.App, name: str = "wf") -> None:
    @app.workflow(name)
    def run(event, step):
        step.do("one", lambda: 1)
        step.sleep("nap", "1 hour")
        return step.do("two", lambda: event.payload)

    app.start()
    app.stop(grace=1)


def test_an_unknown_workflow_is_workflow_not_found(cv) -> None:
    with pytest.raises(conveyor.WorkflowNotFound) as caught:
        cv.workflow("nope")
    assert caught.value.code == 13003
    with pytest.raises(InvalidWorkflowName):
        cv.workflow("bad name!")


def test_instances_of_a_workflow_no_worker_runs_stay_queued(cv, app) -> None:
    _register(app)
    inst = cv.workflow("wf").create(params={"a": 1}, id="q1")
    time.sleep(0.3)
    s = inst.status()
    assert (s.status, s.params, s.steps, s.start) == ("queued", {"a": 1}, [], None)


def test_ids_are_unique_and_never_reused_even_after_delete(cv, app) -> None:
    _register(app)
    wf = cv.workflow("wf")
    inst = wf.create(id="same")
    with pytest.raises(conveyor.InstanceExists) as taken:
        wf.create(id="same")
    assert taken.value.code == 13005
    inst.delete()
    with pytest.raises(conveyor.InstanceNotFound):
        wf.get("same")
    with pytest.raises(conveyor.InstanceExists):
        wf.create(id="same")
    generated = wf.create()
    assert len(generated.id) == 36


@pytest.mark.parametrize("bad", ["", "-x", "a b", "x" * 101, "cf_" + "0" * 64, 5])
def test_invalid_or_reserved_ids_are_refused(cv, app, bad) -> None:
    _register(app)
    wf = cv.workflow("wf")
    with pytest.raises(InvalidInstanceId) as caught:
        wf.create(id=bad)
    assert caught.value.code == 13002
    assert wf.list_instances().instances == []


def test_params_over_1_mib_or_not_json_are_refused(cv, app) -> None:
    _register(app)
    wf = cv.workflow("wf")
    with pytest.raises(PayloadTooLarge) as big:
        wf.create(params="x" * (1 << 20))
    assert "the limit is 1048576" in str(big.value)
    with pytest.raises(PayloadTooLarge):
        wf.create(params=object())
    assert wf.list_instances().instances == []


def test_create_batch_reports_errors_per_item_and_creates_the_rest(cv, app) -> None:
    _register(app)
    wf = cv.workflow("wf")
    wf.create(id="old")
    result = wf.create_batch(
        [{"params": 1, "id": "a"}, {"id": "old"}, {"id": "bad id"}, {"params": 2}, {"id": "a"}, {"nope": 1}]
    )
    assert result.created[0].id == "a" and len(result.created) == 2
    assert [(e.index, e.code) for e in result.errors] == [(1, 13005), (2, 13002), (4, 13002), (5, 10207)]
    with pytest.raises(conveyor.InvalidRequest):
        wf.create_batch([{}] * 101)
    assert len(wf.list_instances().instances) == 3


def test_list_instances_pages_by_cursor_and_filters(cv, app, clock) -> None:
    _register(app)
    wf = cv.workflow("wf")
    for n in range(5):
        wf.create(id=f"i{n}")
        clock.advance(1)
    page = wf.list_instances(per_page=2)
    seen = [i.id for i in page.instances]
    while page.cursor:
        page = wf.list_instances(per_page=2, cursor=page.cursor)
        seen += [i.id for i in page.instances]
    assert seen == ["i0", "i1", "i2", "i3", "i4"]
    assert [i.id for i in wf.list_instances(direction="desc", per_page=2).instances] == ["i4", "i3"]
    assert [i.id for i in wf.list_instances(status="queued").instances] == seen
    assert wf.list_instances(status="running").instances == []
    start = wf.list_instances().instances[2].created_on
    assert [i.id for i in wf.list_instances(date_start=start).instances] == ["i2", "i3", "i4"]
    for bad in ({"status": "sleeping"}, {"per_page": 0}, {"cursor": "zz"}, {"direction": "up"}):
        with pytest.raises(conveyor.InvalidRequest):
            wf.list_instances(**bad)


def test_pause_and_resume_a_waiting_instance_shifts_its_timer(cv, app, clock) -> None:
    ledger = Ledger()

    @app.workflow("pausable")
    def run(event, step):
        step.sleep("nap", 100)
        return step.do("after", ledger("after"))

    with running(app):
        inst = cv.workflow("pausable").create()
        settled(inst, "waiting")
        advance(app, clock, 40)
        inst.pause()
        assert inst.status().status == "paused"
        with pytest.raises(conveyor.InvalidInstanceState):
            inst.pause()
        advance(app, clock, 100)  # the original wake time passes while paused
        time.sleep(0.3)
        assert inst.status().status == "paused" and ledger.calls == {}
        inst.resume()
        with pytest.raises(conveyor.InvalidInstanceState) as again:
            inst.resume()
        assert again.value.code == 13007
        assert inst.status().status == "waiting"
        advance(app, clock, 59)  # 60 s of the sleep were left when it paused
        time.sleep(0.3)
        assert ledger.calls == {}
        advance(app, clock, 1)
        settled(inst, "complete")


def test_pausing_a_running_instance_waits_for_its_step(cv, app) -> None:
    started, release = threading.Event(), threading.Event()
    ledger = Ledger()

    def long_step() -> str:
        started.set()
        release.wait(10)
        return "done"

    @app.workflow("busy")
    def run(event, step):
        step.do("long", long_step)
        return step.do("next", ledger("next"))

    with running(app):
        inst = cv.workflow("busy").create()
        assert started.wait(10)
        # An attempt running past a second is shown as under way.
        wait_for(lambda: inst.status().steps, timeout=10, what="the running step to show")
        (running_step,) = inst.status().steps
        assert (running_step.name, running_step.success, running_step.end) == ("long-1", None, None)
        assert [(a.end, a.success) for a in running_step.attempts] == [(None, None)]
        assert running_step.attempts[0].start is not None
        inst.pause()
        assert inst.status().status == "waitingForPause"
        release.set()
        s = settled(inst, "paused")
        assert [st.name for st in s.steps] == ["long-1"] and ledger.calls == {}
        inst.resume()
        s = settled(inst, "complete")
    assert ledger.calls == {"next": 1}


def test_terminate_ends_an_instance_and_a_finished_one_is_refused(cv, app, clock) -> None:
    _register(app)
    with running(app):
        wf = cv.workflow("wf")
        inst = wf.create(params="p")
        settled(inst, "waiting")
        inst.terminate()
        assert inst.status().status == "terminated"
        advance(app, clock, 3600)
        time.sleep(0.3)
        s = inst.status()
        assert s.status == "terminated" and [st.name for st in s.steps] == ["one-1", "nap-1"]
        with pytest.raises(conveyor.InvalidInstanceState) as caught:
            inst.terminate()
        assert caught.value.code == 13007
        for action in (inst.pause, inst.resume):
            with pytest.raises(conveyor.InvalidInstanceState):
                action()
        assert inst.status() == s


def test_restart_from_a_step_keeps_the_results_before_it(cv, app) -> None:
    ledger = Ledger()

    @app.workflow("restartable")
    def run(event, step):
        a = step.do("a", ledger("a"))
        b = step.do("b", ledger("b"))
        c = step.do("c", ledger("c"))
        return [a, b, c]

    with running(app):
        inst = cv.workflow("restartable").create()
        settled(inst, "complete")
        inst.restart(from_step="b")
        time.sleep(0.1)
        s = settled(inst, "complete")
        assert ledger.calls == {"a": 1, "b": 2, "c": 2}
        inst.restart(from_step={"name": "c", "count": 1, "type": "do"})
        settled(inst, "complete")
        assert ledger.calls == {"a": 1, "b": 2, "c": 3}
        inst.restart()
        settled(inst, "complete")
        assert ledger.calls == {"a": 2, "b": 3, "c": 4}
        before = inst.status()
        for bad in ({"name": "a", "type": "run"}, {"name": "zz"}, {"name": "a", "count": 0}, {"bogus": 1}):
            with pytest.raises(conveyor.workflows.InvalidStepConfig):
                inst.restart(from_step=bad)
        assert inst.status() == before
    assert s.output == ["a", "b", "c"]


def test_internal_queues_are_hidden_from_the_account_listing(cv, app) -> None:
    cv.create_queue("mine")
    _register(app, "hidden")
    assert [q.queue_name for q in cv.list_queues()] == ["mine"]
    with pytest.raises(conveyor.InvalidQueueName):
        cv.queue("workflow~hidden")


def test_concurrency_is_the_internal_consumer_max_concurrency(cv, app) -> None:
    @app.workflow("limited", concurrency=3)
    def run(event, step):
        return 1

    with running(app):
        (dispatcher,) = app.dispatchers.values()
        assert dispatcher.spec.settings.max_concurrency == 3
        assert dispatcher.spec.script_name.endswith(
            ":test_concurrency_is_the_internal_consumer_max_concurrency.<locals>.run"
        )


def test_a_workflow_without_concurrency_runs_the_default_number_at_once(cv, app) -> None:
    @app.workflow("unlimited")
    def run(event, step):
        return 1

    with running(app):
        (dispatcher,) = app.dispatchers.values()
        assert dispatcher.spec.settings.max_concurrency == DEFAULT_CONCURRENCY < conveyor.limits.MAX_CONCURRENCY
    assert cv.workflow("unlimited").record.settings.concurrency is None  # shown as not set


@pytest.mark.parametrize(
    "settings",
    [
        {"schedules": ["* * *"]},
        {"schedules": ["61 * * * *"]},
        {"schedules": ["*/0 * * * *"]},
        {"max_steps": 0},
        {"concurrency": 0},
        {"success_retention": "forever"},
    ],
)
def test_bad_workflow_settings_are_refused(cv, app, settings) -> None:
    with pytest.raises(conveyor.workflows.InvalidStepConfig):
        app.workflow("x", **settings)(lambda event, step: None)
    assert app.workflows == []


def test_schedules_are_stored_with_the_record(cv, app) -> None:
    @app.workflow("cron", schedules=["*/10 * * * *", "0 9 * jan-mar mon-fri"])
    def run(event, step):
        return None

    app.start()
    app.stop(grace=1)
    assert cv.workflow("cron").record.settings.schedules == ("*/10 * * * *", "0 9 * jan-mar mon-fri")


def test_durations_parse_seconds_and_unit_strings() -> None:
    parse = conveyor.workflows.parse_duration
    assert [parse(30), parse("1 hour"), parse("10 minutes"), parse("2 days"), parse("1 second")] == [
        30.0,
        3600.0,
        600.0,
        172_800.0,
        1.0,
    ]
    for bad in (-1, "an hour", "5 fortnights", True, None):
        with pytest.raises(conveyor.workflows.InvalidStepConfig):
            parse(bad)


def test_async_client_has_the_workflow_methods(cv, app) -> None:
    _register(app, "twin")

    async def scenario() -> None:
        acv = conveyor.AsyncConveyor(cv)
        wf = await acv.workflow("twin")
        inst = await wf.create(params=5, id="t1")
        assert (await inst.status()).status == "queued"
        assert [i.id for i in (await wf.list_instances()).instances] == ["t1"]
        await inst.pause()
        await inst.resume()
        await inst.terminate()
        assert (await (await wf.get("t1")).status()).status == "terminated"
        await inst.delete()

    asyncio.run(scenario())
