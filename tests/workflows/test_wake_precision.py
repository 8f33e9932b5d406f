"""A sleep ends at the millisecond it asked for: its wake-up message is delayed by a fraction of a
second, not rounded up to the next whole one (over HTTP, whose wire carries whole seconds, it is)."""

from __future__ import annotations

import time

import conveyor
from tests.workflows.support import advance, running, settled


def test_a_sleep_ends_at_the_millisecond_it_asked_for(cv, app, clock, request) -> None:
    woke: list[int] = []

    @app.workflow("precise")
    def run(event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> str:
        step.sleep("nap", 1.25)
        woke.append(clock.now_ms())
        return "woke"

    with running(app):
        inst = cv.workflow("precise").create()
        asleep = settled(inst, "waiting")
        assert asleep.steps[0].type == "sleep"
        advance(app, clock, 1.249)
        time.sleep(0.3)
        assert woke == [], "woke before the sleep ended"
        advance(app, clock, 0.001)
        if request.node.callspec.params["cv"] == "http":
            time.sleep(0.3)
            assert woke == [], "over HTTP the wake-up is rounded up to whole seconds"
            advance(app, clock, 0.75)
        assert settled(inst, "complete").output == "woke"
