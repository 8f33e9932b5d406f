from __future__ import annotations

import conveyor
from tests.workflows.support import Ledger, advance, running, settled


def test_multi_step_workflow_with_sleep_and_event_completes(cv, app, clock) -> None:
    ledger = Ledger()

    @app.workflow("pipeline")
    def pipeline(event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> dict:
        a = step.do("first", ledger("first", 1))
        step.sleep("nap", "1 hour")
        b = step.do("second", ledger("second", 2))
        done = step.wait_for_event("go", type="go", timeout="1 day")
        return {"sum": a + b, "event": done.payload, "name": event.payload["name"]}

    with running(app):
        inst = cv.workflow("pipeline").create(params={"name": "x"}, id="one")
        s = settled(inst, "waiting")
        assert ledger.calls == {"first": 1}
        advance(app, clock, 3600)
        settled(inst, "waiting")
        import time; time.sleep(0.5)
        print(inst.status())
        assert ledger.calls == {"first": 1, "second": 1}
        inst.send_event("go", {"ok": True})
        s = settled(inst, "complete")
    assert s.output == {"sum": 3, "event": {"ok": True}, "name": "x"}
    assert ledger.calls == {"first": 1, "second": 1}
    assert [st.name for st in s.steps] == ["first-1", "nap-1", "second-1", "go-1"]
