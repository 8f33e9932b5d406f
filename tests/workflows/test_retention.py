"""Retention of finished instances: pruned by the coordinator's service, by the engine's clock."""

from __future__ import annotations

import pytest

import conveyor
from conveyor.workflows.retention import SERVICE, prune_finished
from tests.workflows.support import deployment_side, running, settled

DAY = 86_400


def test_finished_instances_are_pruned_after_3_days_complete_and_7_days_errored(cv, app, clock) -> None:
    @app.workflow("kept")
    def run(event, step):
        if event.payload == "fail":
            raise ValueError("failed")
        if event.payload == "wait":
            step.wait_for_event("e", type="never", timeout="30 days")
        return "ok"

    with running(app):
        assert any(name == SERVICE for name, _, _ in app._coordinator.services)
        wf = cv.workflow("kept")
        done, failed, waiting = wf.create("ok", id="done"), wf.create("fail", id="failed"), wf.create("wait", id="wait")
        settled(done, "complete")
        settled(failed, "errored")
        settled(waiting, "waiting")
    clock.advance(3 * DAY - 1)
    assert prune_finished(deployment_side(cv)) == 0
    clock.advance(1)
    assert prune_finished(deployment_side(cv)) == 1
    with pytest.raises(conveyor.InstanceNotFound):
        wf.get("done")
    clock.advance(4 * DAY)
    assert prune_finished(deployment_side(cv)) == 1
    assert [i.id for i in wf.list_instances().instances] == ["wait"]
    with pytest.raises(conveyor.InstanceExists):
        wf.create(id="done")


def test_retention_is_configurable_per_workflow(cv, app, clock) -> None:
    @app.workflow("short", success_retention="1 hour", error_retention=60)
    def run(event, step):
        if event.payload:
            raise ValueError("x")
        return None

    with running(app):
        wf = cv.workflow("short")
        settled(wf.create(False, id="ok"), "complete")
        settled(wf.create(True, id="bad"), "errored")
    clock.advance(60)
    assert prune_finished(deployment_side(cv)) == 1
    clock.advance(3540)
    assert prune_finished(deployment_side(cv)) == 1
    assert wf.list_instances().instances == []
