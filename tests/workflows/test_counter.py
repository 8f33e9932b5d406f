"""``conveyor.Counter``: atomic adds (keyed adds applied once), a notice sent once when the count is
zero and never lost by a process that dies before its wake-up, every bad input refused with
nothing changed, and the fan-out/fan-in recipe of docs/workflows.md."""

from __future__ import annotations

import asyncio
import threading

import pytest

import conveyor
from conveyor.errors import InvalidRequest
from conveyor.workflows import InstanceSummary
from conveyor.workflows.client import workflow_store
from conveyor.workflows.counter import GRACE_SECONDS, send_owed_wakeups
from tests.waiting import wait_for
from tests.workflows.support import advance, deployment_side, running, settled


def _waiter(app: conveyor.App, name: str = "waiter", timeout: float = 3600) -> None:
    @app.workflow(name)
    def wait(event, step):
        got = step.wait_for_event("zero", type="zero", timeout=timeout)
        try:
            step.wait_for_event("again", type="zero", timeout=60)
        except conveyor.workflows.WorkflowStepError:
            return {"payload": got.payload, "second": None}
        return {"payload": got.payload, "second": "came"}


def _step_done(inst, name: str) -> conveyor.StepRecord:
    """Wait until the instance's step ``name`` (``"zero-1"``) has succeeded; returns it."""

    def done() -> conveyor.StepRecord | None:
        step = next((s for s in inst.status().steps if s.name == name), None)
        return step if step is not None and step.success else None

    return wait_for(done, timeout=15, what=f"step {name} of {inst.id} to succeed")


def test_add_returns_the_new_value_atomically(cv) -> None:
    counter = cv.counter("hits")
    assert counter.value() == 0
    assert [counter.add(), counter.add(5), counter.add(-7)] == [1, 6, -1]
    threads = [threading.Thread(target=lambda: [counter.add(1) for _ in range(25)]) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counter.value() == 99
    assert cv.counter("other").value() == 0
    assert workflow_store(deployment_side(cv)).counter_value("another-account", "hits") == 0


def test_an_add_with_a_key_is_applied_once(cv) -> None:
    counter = cv.counter("children")
    assert counter.add(3, key="fan-out") == 3
    assert counter.add(3, key="fan-out") == 3, "a retried step adds nothing"
    assert counter.add(-1, key="child-1") == 2
    assert counter.add(-1, key="child-1") == 2
    assert counter.add(-1, key="child-2") == 1


def test_concurrent_keyed_adds_count_each_key_once_and_one_of_them_sees_zero(cv) -> None:
    counter = cv.counter("burst")
    counter.add(40)
    seen: list[int] = []

    def count_down(start: int) -> None:
        # Every key is added by two threads: each counts once.
        seen.extend(counter.add(-1, key=f"child-{(start + i) % 40}") for i in range(20))

    threads = [threading.Thread(target=count_down, args=(t * 10,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counter.value() == 0
    assert sorted(set(seen))[0] == 0 and len(seen) == 80


def test_reaching_zero_sends_the_event_once(cv, app, clock) -> None:
    _waiter(app)
    with running(app):
        inst = cv.workflow("waiter").create(id="w")
        settled(inst, "waiting")
        counter = cv.counter("jobs")
        counter.add(2)
        counter.notify_at_zero("waiter", "w", "zero")
        counter.notify_at_zero("waiter", "w", "zero")  # a replayed step registers it again
        assert counter.add(-1) == 1
        assert inst.status().status == "waiting"
        assert counter.add(-1) == 0
        _step_done(inst, "zero-1")
        assert counter.add(1) == 1 and counter.add(-1) == 0, "zero again: the notice was sent already"
        counter.notify_at_zero("waiter", "w", "zero")
        advance(app, clock, 61)
        status = settled(inst, "complete")
    assert status.output == {"payload": {"counter": "jobs", "value": 0}, "second": None}


def test_a_notice_registered_at_zero_is_sent_at_once(cv, app) -> None:
    _waiter(app, timeout=60)
    with running(app):
        inst = cv.workflow("waiter").create(id="late")
        counter = cv.counter("already-done")
        counter.add(1)
        counter.add(-1)
        counter.notify_at_zero("waiter", "late", "zero")
        step = _step_done(inst, "zero-1")
        assert step.output["payload"] == {"counter": "already-done", "value": 0}


def test_the_event_is_not_lost_when_the_process_dies_before_its_wake_up(cv, app, clock) -> None:
    _waiter(app)
    with running(app):
        inst = cv.workflow("waiter").create(id="w")
        settled(inst, "waiting")
    side = deployment_side(cv)
    store, raw = workflow_store(side), side.engine.deployment_engine()
    assert raw is not None
    account = cv.deployment.account
    store.counter_add(account, "c", 1, None, clock.now_ms())
    assert store.counter_notify(account, "c", "waiter", "w", "zero", clock.now_ms()).wakeups == []
    # The store's transaction commits the event and the owed wake-up; the process dies before
    # it sends the message.
    change = store.counter_add(account, "c", -1, None, clock.now_ms())
    assert change.value == 0 and [w.instance for w in change.wakeups] == ["w"]
    assert send_owed_wakeups(store, raw) == 0, "its writer may still send it"
    clock.advance(GRACE_SECONDS + 1)
    assert send_owed_wakeups(store, raw) == 1
    assert send_owed_wakeups(store, raw) == 0, "sent once"
    with running(app):
        step = _step_done(inst, "zero-1")
    assert step.output["payload"] == {"counter": "c", "value": 0}


def test_a_notice_for_an_instance_that_ended_is_dropped(cv, app) -> None:
    _waiter(app)
    with running(app):
        inst = cv.workflow("waiter").create(id="gone")
        counter = cv.counter("late")
        counter.add(1)
        counter.notify_at_zero("waiter", "gone", "zero")
        inst.terminate()
        assert counter.add(-1) == 0
    assert inst.status().status == "terminated"


def test_delete_removes_the_counter_and_its_notices(cv, app) -> None:
    _waiter(app)
    with running(app):
        cv.workflow("waiter").create(id="w")
        counter = cv.counter("temp")
        counter.add(2, key="k")
        counter.notify_at_zero("waiter", "w", "zero")
        assert counter.delete() is True
        assert counter.value() == 0 and counter.delete() is False
        assert counter.add(2, key="k") == 2, "its keys went with it"


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        (lambda cv: cv.counter("-dash"), "invalid counter name"),
        (lambda cv: cv.counter("x" * 201), "invalid counter name"),
        (lambda cv: cv.counter("ok").add(True), "whole number"),
        (lambda cv: cv.counter("ok").add(1.5), "whole number"),
        (lambda cv: cv.counter("ok").add(2**53 + 1), "whole number"),
        (lambda cv: cv.counter("ok").add(1, key=""), "key is 1 to 200 characters"),
        (lambda cv: cv.counter("ok").add(1, key="k" * 201), "key is 1 to 200 characters"),
        (lambda cv: cv.counter("ok").notify_at_zero("waiter", "w", ""), "event type"),
        (lambda cv: cv.counter("ok").notify_at_zero("bad name!", "w", "t"), "invalid workflow name"),
        (lambda cv: cv.counter("ok").notify_at_zero("waiter", "-w", "t"), "invalid instance id"),
    ],
)
def test_bad_counter_input_is_refused_and_changes_nothing(cv, call, problem) -> None:
    with pytest.raises(InvalidRequest) as refused:
        call(cv)
    assert problem in str(refused.value)
    assert cv.counter("ok").value() == 0


def test_a_notice_for_no_instance_and_an_overflow_are_refused(cv, app) -> None:
    _waiter(app)
    app.start()
    app.stop(grace=1)
    counter = cv.counter("edge")
    with pytest.raises(conveyor.InstanceNotFound):
        counter.notify_at_zero("waiter", "nobody", "zero")
    counter.add(2**53)
    with pytest.raises(InvalidRequest) as overflow:
        counter.add(1)
    assert "within ±2^53" in str(overflow.value)
    assert counter.value() == 2**53


def test_the_async_client_has_the_counter(cv) -> None:
    async def scenario() -> None:
        acv = conveyor.AsyncConveyor(cv)
        counter = await acv.counter("async")
        assert await counter.add(2) == 2
        assert await counter.add(-1, key="a") == 1
        assert await counter.add(-1, key="a") == 1
        assert await counter.value() == 1
        assert await counter.delete() is True

    asyncio.run(scenario())


# -- the fan-out/fan-in recipe of docs/workflows.md ------------------------------------------------
CHILDREN = 30


def _recipe(app: conveyor.App) -> None:
    cv = app.conveyor

    @app.workflow("build")
    def build(event, step):
        files = event.payload["files"]
        counter = f"build:{event.instance_id}"

        def fan_out() -> int:
            done = cv.counter(counter)
            done.add(len(files), key="fan-out")  # applied once, even if this step runs again
            done.notify_at_zero("build", event.instance_id, "children-done")
            children = [
                {"id": f"{event.instance_id}-{i}", "params": {"counter": counter, "file": name}}
                for i, name in enumerate(files)
            ]
            for start in range(0, len(children), 100):  # a rerun's taken ids are refused, not made again
                cv.workflow("compress").create_batch(children[start : start + 100])
            return len(children)

        count = step.do("fan out", fan_out)
        step.wait_for_event("children", type="children-done", timeout="1 hour")
        step.do("clean up", lambda: cv.counter(counter).delete())
        return count

    @app.workflow("compress")
    def compress(event, step):
        try:
            size = step.do("compress", lambda: len(event.payload["file"]))
        except conveyor.WorkflowStepError:
            size = None  # a failed child still counts down, or its parent would wait for ever
        step.do("count down", lambda: cv.counter(event.payload["counter"]).add(-1, key=event.instance_id))
        return size


def test_the_fan_in_recipe_wakes_the_parent_when_the_last_child_ends(cv, app) -> None:
    _recipe(app)
    with running(app):
        files = [f"file-{i}.js" for i in range(CHILDREN)]
        parent = cv.workflow("build").create({"files": files}, id="b1")
        status = settled(parent, "complete", timeout=60)

        def all_complete() -> list[InstanceSummary] | None:
            # The parent may wake before the last child to count down has stored its own end.
            found = cv.workflow("compress").list_instances(per_page=100).instances
            return found if {c.status for c in found} == {"complete"} else None

        children = wait_for(all_complete, what="every child complete")
    assert status.output == CHILDREN
    assert len(children) == CHILDREN
    assert cv.counter("build:b1").value() == 0, "cleaned up"
    wait = next(s for s in status.steps if s.name == "children-1")
    assert wait.output["payload"] == {"counter": "build:b1", "value": 0}
