"""Fencing and duplicate deliveries: a run's writes count only under the claim that made them."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import conveyor
from conveyor.workflows.client import workflow_store
from conveyor.workflows.execution import WorkflowHandler, send_wake
from conveyor.workflows.model import InstanceRow, StepRow
from conveyor.workflows.sql_store import SqlWorkflowStore
from tests.workflows.conftest import ENGINES
from tests.workflows.support import Ledger, internal_queue, running, settled


def _held(error: BaseException | None) -> None:
    """A hand-driven run's message is the test's: nothing to settle early."""


def _step(key: str, output: str) -> StepRow:
    return StepRow(key, 1, "step", key, "complete", output, "[]", "{}", 0, 1)


def test_a_stale_claim_commits_nothing(cv, app) -> None:
    @app.workflow("fenced")
    def run(event, step):
        return None

    app.start()
    app.stop(grace=1)
    inst = cv.workflow("fenced").create(id="i")
    store = workflow_store(cv)
    account = cv.deployment.account
    old = store.claim(account, "fenced", "i", "message-1", 1)
    assert old is not None
    assert store.claim(account, "fenced", "i", "message-2", 2) is None, "a duplicate message claimed a running instance"
    new = store.claim(account, "fenced", "i", "message-1", 3)  # the same message again: its lease ran out
    assert new is not None and new.instance.epoch == old.instance.epoch + 1
    e_old, e_new = old.instance.epoch, new.instance.epoch
    t_old, t_new = old.instance.run_token, new.instance.run_token
    assert store.save_step(account, "fenced", "i", e_old, _step("step:a:1", '"stale"'), run_token=t_old) is None
    stale_wait = _step("waitForEvent:w:1", "null")
    assert store.take_event(account, "fenced", "i", e_old, stale_wait, "t", run_token=t_old) == (False, None)
    assert store.suspend(account, "fenced", "i", e_old, 10, None, 4, run_token=t_old) is None
    assert store.finish(account, "fenced", "i", e_old, "complete", '"stale"', None, 5, run_token=t_old) is False
    assert inst.status().status == "running" and inst.status().steps == []
    assert store.save_step(account, "fenced", "i", e_new, _step("step:a:1", '"fresh"'), run_token=t_new) == "running"
    assert store.finish(account, "fenced", "i", e_new, "complete", '"fresh"', None, 6, run_token=t_new) is True
    s = inst.status()
    assert (s.status, s.output, [st.output for st in s.steps]) == ("complete", "fresh", ["fresh"])


@pytest.mark.parametrize("cv", ["postgres", "sqlite"], indirect=True)  # the database itself, not over HTTP
def test_a_run_whose_claim_was_lost_cannot_write_beside_the_claim_of_the_same_epoch(cv, app) -> None:
    """A claim may commit without its flush (PostgreSQL): lost in a crash of the database alone,
    the row is back as before it, the message comes again and is claimed at the same epoch. The
    first run goes on in its worker; its writes are refused by the token, the second run's count."""

    @app.workflow("lost")
    def run(event, step):
        return None

    app.start()
    app.stop(grace=1)
    inst = cv.workflow("lost").create(id="i")
    store = workflow_store(cv)
    account = cv.deployment.account
    before = store.get_instance(account, "lost", "i")
    first = store.claim(account, "lost", "i", "message-1", 1)
    assert before is not None and first is not None
    _put_row(store, before)  # what the crash leaves: the row as before the claim, whose commit was lost
    second = store.claim(account, "lost", "i", "message-1", 3)  # the same message, delivered again
    assert second is not None and second.instance.epoch == first.instance.epoch, "the crash gave the epoch back"
    epoch, stale, fresh = first.instance.epoch, first.instance.run_token, second.instance.run_token
    assert stale != fresh
    assert store.save_step(account, "lost", "i", epoch, _step("step:a:1", '"stale"'), run_token=stale) is None
    stale_wait = _step("waitForEvent:w:1", "null")
    assert store.take_event(account, "lost", "i", epoch, stale_wait, "t", run_token=stale) == (False, None)
    assert store.suspend(account, "lost", "i", epoch, 10, None, 4, run_token=stale) is None
    assert store.finish(account, "lost", "i", epoch, "complete", '"stale"', None, 5, run_token=stale) is False
    assert inst.status().status == "running" and inst.status().steps == []
    assert store.save_step(account, "lost", "i", epoch, _step("step:a:1", '"fresh"'), run_token=fresh) == "running"
    assert store.finish(account, "lost", "i", epoch, "complete", '"fresh"', None, 6, run_token=fresh) is True
    s = inst.status()
    assert (s.status, s.output, [st.output for st in s.steps]) == ("complete", "fresh", ["fresh"])


def _put_row(store: object, row: InstanceRow) -> None:
    """Write ``row`` back over the instance, as a crash that lost the commits after it leaves it."""
    assert isinstance(store, SqlWorkflowStore)
    store._db.transaction(lambda tx: store._write(tx, row))


def test_two_workers_the_one_that_lost_its_lease_cannot_overwrite(cv, app, tmp_path: Path, request) -> None:
    """Worker A runs a step; its lease is lost and worker B (another client of the deployment) takes
    the same message over and finishes the instance. A's late result is refused."""
    engine = request.node.callspec.params["cv"]
    in_a, release_a = threading.Event(), threading.Event()
    ran: list[str] = []

    def body(who: str):
        def fn() -> str:
            ran.append(who)
            if who == "A":
                in_a.set()
                release_a.wait(10)
            return who

        return fn

    def workflow(who: str):
        def run(event, step):
            return step.do("work", body(who))

        run.__qualname__ = "run"
        return run

    @app.workflow("contested")
    def registered(event, step):
        return None

    app.start()
    app.stop(grace=1)
    inst = cv.workflow("contested").create(id="c")
    other = ENGINES[engine](tmp_path)
    try:
        handlers = []
        for who, client in (("A", cv), ("B", other)):
            queue_id = internal_queue(client, "contested")
            settings = app.workflows[0].settings
            store = workflow_store(client)
            handlers.append(
                WorkflowHandler(
                    workflow(who), "contested", client.deployment.account, store, client.engine, queue_id, settings
                )
            )
        a = threading.Thread(target=handlers[0].advance, args=("c", None, "m", _held))
        a.start()
        assert in_a.wait(10)
        handlers[1].advance("c", None, "m", _held)  # the message redelivered to B
        assert inst.status().output == "B"
        release_a.set()
        a.join(10)
    finally:
        other.close()
    s = inst.status()
    assert (s.status, s.output, s.steps[0].output, ran) == ("complete", "B", "B", ["A", "B"])


def test_duplicate_and_early_messages_run_nothing(cv, app, clock) -> None:
    ledger = Ledger()

    @app.workflow("dupes")
    def run(event, step):
        step.do("once", ledger("once"))
        step.sleep("nap", 600)
        return step.do("after", ledger("after"))

    with running(app):
        inst = cv.workflow("dupes").create()
        settled(inst, "waiting")
        queue_id = internal_queue(cv, "dupes")
        for _ in range(3):
            send_wake(cv.engine, queue_id, inst.id, None)  # a wake-up too early, three times
        time.sleep(0.5)
        assert ledger.calls == {"once": 1}
        assert inst.status().status == "waiting"
        assert cv.engine.metrics(queue_id).backlog_count == 1  # only the real wake-up is left
        clock.advance(600)
        for d in app.dispatchers.values():
            cv.engine.wake(d.queue_id)
        settled(inst, "complete")
        for _ in range(2):
            send_wake(cv.engine, queue_id, inst.id, None)  # late duplicates of a finished instance
        time.sleep(0.3)
    assert ledger.calls == {"once": 1, "after": 1}
    assert inst.status().status == "complete"
    assert isinstance(inst, conveyor.workflows.Instance)


def test_a_timer_wake_up_that_comes_before_its_run_has_suspended_still_wakes_it(cv, app, clock) -> None:
    @app.workflow("racer")
    def run(event, step):
        return step.do("work", lambda: "done")

    _, spec = app.workflows[0].start(cv)
    handler = spec.handler
    assert isinstance(handler, WorkflowHandler)
    inst = cv.workflow("racer").create(id="r")
    store, account = workflow_store(cv), cv.deployment.account
    # A run that has sent its timer's wake-up (due at once) and is about to store its suspension.
    held = store.claim(account, "racer", "r", "the-run's-message", clock.now_ms())
    assert held is not None
    wake = clock.now_ms()

    def suspend_soon() -> None:
        time.sleep(0.2)
        suspended = store.suspend(
            account, "racer", "r", held.instance.epoch, wake, None, clock.now_ms(), run_token=held.instance.run_token
        )
        assert suspended == "waiting"

    suspender = threading.Thread(target=suspend_soon)
    suspender.start()
    handler.advance("r", wake, "the-timer's-message", _held)  # it came first
    suspender.join()
    assert inst.status().status == "complete" and inst.status().output == "done"


def test_a_stale_timer_wake_up_of_a_run_that_goes_on_is_dropped(cv, app, clock) -> None:
    @app.workflow("long-run")
    def run(event, step):
        return "done"

    _, spec = app.workflows[0].start(cv)
    handler = spec.handler
    assert isinstance(handler, WorkflowHandler)
    inst = cv.workflow("long-run").create(id="l")
    held = workflow_store(cv).claim(cv.deployment.account, "long-run", "l", "the-run's-message", clock.now_ms())
    assert held is not None
    started = time.monotonic()
    handler.advance("l", clock.now_ms() - 1000, "a-late-timer-message", _held)
    assert time.monotonic() - started < 5
    assert inst.status().status == "running", "the run that holds it goes on"
