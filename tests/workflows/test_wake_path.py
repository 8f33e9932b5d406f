"""The wake-up of a sleeping instance: the claim that starts its run stores the sleep complete in
the claim's own transaction (one write fewer per wake-up), as the run itself would."""

from __future__ import annotations

from conveyor.workflows.client import workflow_store
from tests.workflows.support import advance, internal_queue, running, settled


def test_the_claim_after_a_sleep_stores_the_sleep_complete_and_the_run_goes_on(cv, app, clock) -> None:
    @app.workflow("napper")
    def run(event, step):
        step.sleep("nap", 60)
        return step.do("after", lambda: "up")

    with running(app):
        inst = cv.workflow("napper").create(id="n")
        settled(inst, "waiting")
    store, account = workflow_store(cv), cv.deployment.account
    (wake,) = cv.engine.peek(internal_queue(cv, "napper"), 10)  # the delayed wake-up
    assert store.claim(account, "napper", "n", wake.id, clock.now_ms()) is None, "claimed before the sleep was over"
    clock.advance(60)
    # As the wake-up's delivery claims it (its handler then takes the run over, as after a crash).
    claim = store.claim(account, "napper", "n", wake.id, clock.now_ms())
    assert claim is not None
    assert [(s.key, s.status, s.end_ms) for s in claim.steps] == [("sleep:nap:1", "complete", clock.now_ms())]
    assert [(s.name, s.success) for s in inst.status().steps] == [("nap-1", True)]
    with running(app):
        advance(app, clock, 0)
        assert settled(inst, "complete").output == "up"
