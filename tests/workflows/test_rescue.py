"""The rescuer wakes instances whose wake-up message was lost, and only those."""

from __future__ import annotations

from conveyor.workflows.client import workflow_store
from conveyor.workflows.execution import ensure_queue
from conveyor.workflows.model import StepRow
from conveyor.workflows.rescue import GRACE_SECONDS, rescue_overdue
from tests.workflows.support import deployment_side, running, settled


def test_an_instance_whose_message_was_lost_is_woken_again(cv, app, clock) -> None:
    @app.workflow("lost")
    def run(event, step):
        return step.do("work", lambda: "done")

    app.start()
    app.stop(grace=1)
    inst = cv.workflow("lost").create()
    side = deployment_side(cv)
    store, raw = workflow_store(side), side.engine.deployment_engine()
    assert raw is not None
    clock.advance(GRACE_SECONDS + 1)
    assert rescue_overdue(store, raw) == 0, "its message is still there: nothing to rescue"
    queue_id = ensure_queue(side.engine, "lost")
    assert side.engine.purge(queue_id) == 1  # the message is lost
    assert rescue_overdue(store, raw) == 1
    assert rescue_overdue(store, raw) == 0, "woken once; the message waits for a worker"
    with running(app):
        assert settled(inst, "complete").output == "done"
    assert rescue_overdue(store, raw) == 0


def test_a_running_instance_whose_message_is_gone_is_queued_again_and_completes(cv, app, clock) -> None:
    @app.workflow("orphan")
    def run(event, step):
        return step.do("work", lambda: "done")

    app.start()
    app.stop(grace=1)
    inst = cv.workflow("orphan").create(id="o")
    side = deployment_side(cv)
    store, raw = workflow_store(side), side.engine.deployment_engine()
    assert raw is not None
    claim = store.claim(cv.deployment.account, "orphan", "o", "a-message-that-was-dropped", clock.now_ms())
    assert claim is not None
    side.engine.purge(ensure_queue(side.engine, "orphan"))
    clock.advance(GRACE_SECONDS - 1)
    assert rescue_overdue(store, raw) == 0, "not overdue yet"
    clock.advance(2)
    assert rescue_overdue(store, raw) == 1
    assert inst.status().status == "queued"
    late = StepRow("step:work:1", 1, "step", "work", "complete", '"late"', "[]", "{}", 0, 1)
    epoch, token = claim.instance.epoch, claim.instance.run_token
    assert store.save_step(cv.deployment.account, "orphan", "o", epoch, late, run_token=token) is None
    with running(app):
        assert settled(inst, "complete").output == "done"
