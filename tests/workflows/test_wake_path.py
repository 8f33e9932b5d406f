"""The wake-up of a sleeping instance: the claim that starts its run stores the sleep complete in
the claim's own transaction (one write fewer per wake-up), as the run itself would."""

from __future__ import annotations

from conveyor.deployment import Deployment
from conveyor.workflows.client import workflow_store
from conveyor.workflows.databases import open_served_store, open_store
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


def test_only_a_servers_sqlite_store_makes_claims_wait_for_their_flush(cv, tmp_path) -> None:
    """A claim lost in a power failure of a worker's own SQLite store is lost with every local
    process that could run under it; one lost by PostgreSQL while its workers run on gives its
    epoch back, and the run token fences the run that claimed it (test_fencing). A SQLite server's
    clients outlive its machine: its claims wait for their flush."""
    # Over HTTP, the stores are the server's, on its SQLite directory.
    deployment = Deployment("sqlite", str(tmp_path / "data")) if cv.deployment.kind == "http" else cv.deployment
    local = open_store(deployment, cv.engine.clock)
    served = open_served_store(deployment, cv.engine.clock)
    try:
        served_durable = deployment.kind == "sqlite"
        assert (local._db.claims_durable, served._db.claims_durable) == (False, served_durable)
    finally:
        local.close()
        served.close()
