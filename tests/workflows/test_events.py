"""step.wait_for_event and send_event: buffering per type in order, waking, timeouts."""

from __future__ import annotations

import time

import pytest

import conveyor
from tests.waiting import wait_for
from tests.workflows.support import advance, running, settled


def test_events_sent_before_the_wait_are_buffered_per_type_in_order(cv, app, clock) -> None:
    @app.workflow("buffer")
    def run(event, step):
        step.sleep("first", 60)
        a = step.wait_for_event("a", type="t")
        b = step.wait_for_event("b", type="t")
        other = step.wait_for_event("c", type="other")
        return [a.payload, b.payload, other.payload, a.type]

    with running(app):
        inst = cv.workflow("buffer").create()
        settled(inst, "waiting")
        inst.send_event("other", "o")
        inst.send_event("t", 1)
        inst.send_event("t", 2)
        advance(app, clock, 60)
        s = settled(inst, "complete")
    assert s.output == [1, 2, "o", "t"]


def test_send_event_wakes_a_waiting_instance_at_once(cv, app) -> None:
    @app.workflow("wake")
    def run(event, step):
        return step.wait_for_event("e", type="ready", timeout="1 hour").payload

    with running(app):
        inst = cv.workflow("wake").create()
        settled(inst, "waiting")
        time.sleep(0.2)
        inst.send_event("not-this-one", 0)
        time.sleep(0.3)
        assert inst.status().status == "waiting"
        inst.send_event("ready", {"n": 7})
        assert settled(inst, "complete").output == {"n": 7}


def test_a_wait_times_out_and_a_late_event_is_kept_for_the_next_wait(cv, app, clock) -> None:
    @app.workflow("timeout")
    def run(event, step):
        try:
            step.wait_for_event("first", type="t", timeout=30)
        except conveyor.WorkflowStepError as exc:
            timed_out = exc.name
        step.sleep("between", 60)
        late = step.wait_for_event("second", type="t", timeout=30)
        return [timed_out, late.payload]

    with running(app):
        inst = cv.workflow("timeout").create()
        settled(inst, "waiting")
        advance(app, clock, 30)
        # The instance is "waiting" before and after its timeout is handled: wait for the sleep
        # the run goes on to, which it reaches only once the first wait's timeout is recorded.
        steps = wait_for(
            lambda: len(inst.status().steps) == 2 and inst.status().steps, 20, "the first wait to time out"
        )
        assert steps[0].success is False and steps[0].error["name"] == "WorkflowTimeoutError"
        inst.send_event("t", "late")  # after the first wait timed out, before the second began
        advance(app, clock, 60)
        s = settled(inst, "complete")
    assert s.output == ["WorkflowTimeoutError", "late"]


def test_an_uncaught_wait_timeout_errors_the_instance(cv, app, clock) -> None:
    @app.workflow("uncaught")
    def run(event, step):
        step.wait_for_event("e", type="t", timeout="10 minutes")

    with running(app):
        inst = cv.workflow("uncaught").create()
        settled(inst, "waiting")
        advance(app, clock, 600)
        s = settled(inst, "errored")
    assert s.error["name"] == "WorkflowTimeoutError"


def test_default_wait_timeout_is_24_hours(cv, app, clock) -> None:
    @app.workflow("default-timeout")
    def run(event, step):
        step.wait_for_event("e", type="t")

    with running(app):
        inst = cv.workflow("default-timeout").create()
        settled(inst, "waiting")
        advance(app, clock, 86_399)
        time.sleep(0.3)
        assert inst.status().status == "waiting"
        advance(app, clock, 1)
        settled(inst, "errored")


def test_bad_events_are_refused_and_change_nothing(cv, app) -> None:
    @app.workflow("refuse")
    def run(event, step):
        return step.wait_for_event("e", type="t").payload

    with running(app):
        inst = cv.workflow("refuse").create()
        settled(inst, "waiting")
        with pytest.raises(conveyor.workflows.PayloadTooLarge) as big:
            inst.send_event("t", "x" * (1 << 20))
        assert big.value.code == 13006 and "1048576" in str(big.value)
        with pytest.raises(conveyor.InvalidRequest):
            inst.send_event("", 1)
        time.sleep(0.2)
        assert inst.status().status == "waiting"
        inst.send_event("t", "fine")
        settled(inst, "complete")
        with pytest.raises(conveyor.InvalidInstanceState) as finished:
            inst.send_event("t", "too late")
        assert finished.value.code == 13007
        missing = conveyor.workflows.Instance(inst.workflow, "nope")
        with pytest.raises(conveyor.InstanceNotFound):
            missing.send_event("t", 1)


def test_an_event_sent_while_paused_is_taken_on_resume(cv, app) -> None:
    @app.workflow("paused-wait")
    def run(event, step):
        return step.wait_for_event("e", type="t", timeout="1 day").payload

    with running(app):
        inst = cv.workflow("paused-wait").create()
        settled(inst, "waiting")
        inst.pause()
        inst.send_event("t", "while paused")
        time.sleep(0.3)
        assert inst.status().status == "paused"
        inst.resume()
        assert settled(inst, "complete").output == "while paused"


def test_restart_from_a_wait_gives_its_event_back(cv, app) -> None:
    seen: list[str] = []

    @app.workflow("rewait")
    def run(event, step):
        got = step.wait_for_event("e", type="t")
        step.do("record", lambda: seen.append(got.payload) or len(seen))
        return got.payload

    with running(app):
        inst = cv.workflow("rewait").create()
        settled(inst, "waiting")
        inst.send_event("t", "first")
        settled(inst, "complete")
        inst.restart(from_step={"name": "e", "type": "waitForEvent"})
        assert settled(inst, "complete").output == "first"
    assert seen == ["first", "first"]
