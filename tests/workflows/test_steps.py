"""step.do, step.sleep and step.sleep_until: results stored once and replayed, retries, timeouts,
limits (on SQLite and PostgreSQL, with the clock moved by hand)."""

from __future__ import annotations

import datetime
import threading
import time

import pytest

import conveyor
from tests.waiting import wait_for
from tests.workflows.support import Ledger, advance, running, settled


def test_multi_step_workflow_with_sleep_and_event_completes_without_recomputing(cv, app, clock) -> None:
    ledger = Ledger()

    @app.workflow("pipeline")
    def pipeline(event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> dict:
        a = step.do("first", ledger("first", 1))
        step.sleep("nap", "1 hour")
        b = step.do("second", ledger("second", 2))
        done = step.wait_for_event("go", type="go", timeout="1 day")
        return {"sum": a + b, "event": done.payload, "name": event.payload["name"], "id": event.instance_id}

    with running(app):
        inst = cv.workflow("pipeline").create(params={"name": "x"}, id="one")
        settled(inst, "waiting")
        assert ledger.calls == {"first": 1}
        advance(app, clock, 3599)
        time.sleep(0.3)
        assert ledger.calls == {"first": 1}, "woke before the sleep ended"
        advance(app, clock, 1)
        settled(inst, "waiting")
        time.sleep(0.3)
        assert ledger.calls == {"first": 1, "second": 1}
        inst.send_event("go", {"ok": True})
        s = settled(inst, "complete")
    assert s.output == {"sum": 3, "event": {"ok": True}, "name": "x", "id": "one"}
    assert ledger.calls == {"first": 1, "second": 1}
    assert [(st.name, st.type, st.success) for st in s.steps] == [
        ("first-1", "step", True),
        ("nap-1", "sleep", True),
        ("second-1", "step", True),
        ("go-1", "waitForEvent", True),
    ]
    assert s.steps[0].output == 1 and s.steps[3].output["payload"] == {"ok": True}
    assert s.success is True and s.start is not None and s.end is not None
    assert len(s.trace_id) == 32 and int(s.trace_id, 16) >= 0


def test_same_step_name_twice_is_two_occurrences(cv, app) -> None:
    @app.workflow("twice")
    def twice(event, step):
        return [step.do("fetch", lambda: 1), step.do("fetch", lambda: 2)]

    with running(app):
        s = settled(cv.workflow("twice").create(), "complete")
    assert s.output == [1, 2]
    assert [st.name for st in s.steps] == ["fetch-1", "fetch-2"]


def test_retries_count_after_the_first_attempt_with_exponential_delays(cv, app, clock) -> None:
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(clock.now_ms())
        if len(attempts) < 3:
            raise RuntimeError(f"boom {len(attempts)}")
        return "ok"

    @app.workflow("flaky")
    def run(event, step):
        return step.do("flaky", flaky, retries=conveyor.Retries(limit=2, delay=10, backoff="exponential"))

    with running(app):
        inst = cv.workflow("flaky").create()
        settled(inst, "waiting")
        assert len(attempts) == 1
        advance(app, clock, 10)  # first retry after 10 s
        settled(inst, "waiting")
        time.sleep(0.2)
        assert len(attempts) == 2
        advance(app, clock, 19)  # second after 20 s
        time.sleep(0.3)
        assert len(attempts) == 2
        advance(app, clock, 1)
        s = settled(inst, "complete")
    assert s.output == "ok"
    step = s.steps[0]
    assert [a.success for a in step.attempts] == [False, False, True]
    assert step.attempts[0].error == {"name": "RuntimeError", "message": "boom 1"}
    assert step.config["retries"] == {"limit": 2, "delay": 10000.0, "backoff": "exponential"}


@pytest.mark.parametrize(
    ("backoff", "expected"), [("constant", [5, 5, 5]), ("linear", [5, 10, 15]), ("exponential", [5, 10, 20])]
)
def test_backoff_delays(backoff: str, expected: list[int]) -> None:
    retries = conveyor.Retries(limit=3, delay=5, backoff=backoff)  # type: ignore[arg-type]
    assert [retries.delay_after(n, 5.0) for n in (1, 2, 3)] == expected


def test_exhausted_step_raises_inside_the_workflow_and_can_be_caught(cv, app) -> None:
    @app.workflow("catches")
    def run(event, step):
        try:
            step.do("always fails", _fail, retries=conveyor.Retries(limit=1, delay=0))
        except conveyor.WorkflowStepError as exc:
            return {"caught": exc.name, "message": exc.message}
        return "not reached"

    with running(app):
        s = settled(cv.workflow("catches").create(), "complete")
    assert s.output == {"caught": "ValueError", "message": "no"}
    assert len(s.steps[0].attempts) == 2 and s.steps[0].success is False


def _fail() -> None:
    raise ValueError("no")


def test_uncaught_step_failure_errors_the_instance(cv, app) -> None:
    @app.workflow("fails")
    def run(event, step):
        step.do("always fails", _fail, retries=conveyor.Retries(limit=0, delay=0))

    with running(app):
        s = settled(cv.workflow("fails").create(), "errored")
    assert s.error == {"name": "ValueError", "message": "no"}
    assert s.success is False


def test_non_retryable_error_ends_retries_at_once(cv, app) -> None:
    calls: list[int] = []

    def bad() -> None:
        calls.append(1)
        raise conveyor.NonRetryableError("bad tarball")

    @app.workflow("nonretry")
    def run(event, step):
        step.do("unpack", bad, retries=conveyor.Retries(limit=5, delay=0))

    with running(app):
        s = settled(cv.workflow("nonretry").create(), "errored")
    assert calls == [1]
    assert s.error == {"name": "NonRetryableError", "message": "bad tarball"}


def test_an_attempt_past_its_timeout_fails_and_is_retried(cv, app) -> None:
    release = threading.Event()
    calls: list[int] = []

    def slow() -> str:
        calls.append(1)
        if len(calls) == 1:
            release.wait(5)
        return "fast"

    @app.workflow("slow")
    def run(event, step):
        return step.do("slow", slow, retries=conveyor.Retries(limit=1, delay=0), timeout=0.2)

    with running(app):
        s = settled(cv.workflow("slow").create(), "complete")
    release.set()
    assert s.output == "fast"
    assert s.steps[0].attempts[0].error["name"] == "StepTimeout"


def test_an_overrun_hands_the_run_on_while_its_function_still_holds_the_thread(cv, app) -> None:
    """A step's function runs on its run's thread; past the timeout the run goes on elsewhere (the
    retry here), the message's place is free for other instances (concurrency 1), and what the
    abandoned function returns later changes nothing."""
    release = threading.Event()
    calls: list[int] = []

    def stuck() -> str:
        calls.append(1)
        if len(calls) == 1:
            release.wait(30)
            return "late"
        return "retried"

    @app.workflow("handed-on", concurrency=1)
    def run(event, step):
        if (event.payload or {}).get("other"):
            return step.do("quick", lambda: "other done")
        return step.do("stuck", stuck, retries=conveyor.Retries(limit=1, delay=0), timeout=0.3)

    try:
        with running(app):
            wf = cv.workflow("handed-on")
            first = wf.create()
            assert settled(first, "complete").output == "retried"
            assert settled(wf.create(params={"other": True}), "complete").output == "other done"
            assert not release.is_set() and len(calls) == 2
            release.set()
            time.sleep(0.3)  # the abandoned call returns "late": refused, nothing written
            s = first.status()
    finally:
        release.set()
    assert s.status == "complete" and s.output == "retried"
    assert [a.error["name"] if a.error else None for a in s.steps[0].attempts] == ["StepTimeout", None]


def test_an_overrun_of_the_last_attempt_raises_in_the_workflow(cv, app) -> None:
    release = threading.Event()

    @app.workflow("overrun-for-good")
    def run(event, step):
        try:
            step.do("stuck", lambda: release.wait(30), retries=conveyor.Retries(limit=0), timeout=0.2)
        except conveyor.WorkflowStepError as exc:
            return exc.name
        return "finished"

    try:
        with running(app):
            s = settled(cv.workflow("overrun-for-good").create(), "complete")
    finally:
        release.set()
    assert s.output == "StepTimeout"
    assert s.steps[0].success is False and len(s.steps[0].attempts) == 1


def test_a_long_attempt_shows_as_under_way_before_it_ends(cv, app) -> None:
    release = threading.Event()

    @app.workflow("long-attempt")
    def run(event, step):
        return step.do("long", lambda: release.wait(30) and "done", timeout=60)

    try:
        with running(app):
            inst = cv.workflow("long-attempt").create()
            shown = wait_for(lambda: [a for st in inst.status().steps for a in st.attempts], timeout=10)
            assert shown[0].start is not None and shown[0].end is None and shown[0].success is None
            release.set()
            assert settled(inst, "complete").output == "done"
    finally:
        release.set()


def test_a_result_over_1_mib_or_not_json_fails_the_step(cv, app) -> None:
    @app.workflow("big")
    def run(event, step):
        out = []
        for name, fn in (("big", lambda: "x" * (1 << 20)), ("set", lambda: {1, 2})):
            try:
                step.do(name, fn, retries=conveyor.Retries(limit=3, delay=0))
            except conveyor.WorkflowStepError as exc:
                out.append(exc.name)
        return out

    with running(app):
        s = settled(cv.workflow("big").create(), "complete")
    assert s.output == ["PayloadTooLarge", "PayloadTooLarge"]
    assert [len(st.attempts) for st in s.steps] == [1, 1]


def test_sleep_until_a_datetime_and_epoch_seconds(cv, app, clock) -> None:
    @app.workflow("until")
    def run(event, step):
        now = clock.now_ms() / 1000
        step.sleep_until("a", datetime.datetime.fromtimestamp(event.payload["at"], datetime.UTC))
        step.sleep_until("b", event.payload["at"] + 60)
        return round(now)

    start = clock.now_ms() / 1000
    with running(app):
        inst = cv.workflow("until").create(params={"at": start + 120})
        settled(inst, "waiting")
        advance(app, clock, 120)
        settled(inst, "waiting")
        time.sleep(0.3)
        assert [st.success for st in inst.status().steps] == [True, None]
        advance(app, clock, 60)
        settled(inst, "complete")


def test_a_sleep_over_365_days_errors_the_instance(cv, app) -> None:
    @app.workflow("long-sleep")
    def run(event, step):
        step.sleep("forever", "366 days")

    with running(app):
        s = settled(cv.workflow("long-sleep").create(), "errored")
    assert s.error["name"] == "InvalidStepConfig" and "365 days" in s.error["message"]


def test_a_sleep_longer_than_the_queue_delay_limit_is_reached_by_a_chain_of_wake_ups(cv, app, clock) -> None:
    @app.workflow("week")
    def run(event, step):
        step.sleep("a week", "7 days")
        return "rested"

    with running(app):
        inst = cv.workflow("week").create()
        settled(inst, "waiting")
        for _ in range(6):
            advance(app, clock, 86_400)
            time.sleep(0.3)
            assert inst.status().status == "waiting"
        advance(app, clock, 86_400)
        assert settled(inst, "complete").output == "rested"


def test_max_steps_errors_the_instance(cv, app) -> None:
    @app.workflow("bounded", max_steps=3)
    def run(event, step):
        for n in range(5):
            step.do(f"s{n}", lambda n=n: n)

    with running(app):
        s = settled(cv.workflow("bounded").create(), "errored")
    assert s.error["name"] == "StepLimitExceeded"
    assert len(s.steps) == 3


def test_bad_step_names_and_settings_error_the_instance(cv, app) -> None:
    @app.workflow("bad-config")
    def run(event, step):
        out = []
        for call in (
            lambda: step.do("", lambda: 1),
            lambda: step.do("x" * 257, lambda: 1),
            lambda: step.do("ctl\x00", lambda: 1),
            lambda: step.do("r", lambda: 1, retries=conveyor.Retries(limit=-1)),
            lambda: step.do("t", lambda: 1, timeout="soon"),
            lambda: step.sleep("s", "3 fortnights"),
        ):
            try:
                call()
            except conveyor.ConveyorError as exc:
                out.append(exc.code)
        return out

    with running(app):
        s = settled(cv.workflow("bad-config").create(), "complete")
    assert s.output == [13008] * 6


def test_async_workflow_awaits_its_steps(cv, app, clock) -> None:
    async def fetch() -> int:
        return 41

    @app.workflow("async")
    async def run(event, step):
        n = await step.do("fetch", fetch)
        m = await step.do("sync fn", lambda: 1)
        await step.sleep("nap", 30)
        got = await step.wait_for_event("e", type="t")
        return n + m + got.payload

    with running(app):
        inst = cv.workflow("async").create()
        settled(inst, "waiting")
        advance(app, clock, 30)
        settled(inst, "waiting")
        time.sleep(0.2)
        inst.send_event("t", 100)
        assert settled(inst, "complete").output == 142
