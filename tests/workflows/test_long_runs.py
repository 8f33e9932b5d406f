"""A long run keeps going in one worker: step N costs what step 1 costs, because the function is not
replayed from its start for each step (a replay per step would enter it once a step and cost
quadratically; counted here, not timed, so a loaded machine cannot fail it)."""

from __future__ import annotations

import itertools
import statistics
import time

from tests.waiting import wait_for
from tests.workflows.support import running, settled

STEPS = 2000
WINDOW = 400


def test_the_cost_of_a_step_does_not_grow_with_the_number_of_steps_before_it(cv, app) -> None:
    stamps: list[float] = []
    entries: list[int] = []

    @app.workflow("long", max_steps=STEPS)
    def run(event, step):
        entries.append(len(stamps))  # the steps done when the function was entered
        for n in range(STEPS):
            step.do(f"s{n}", lambda n=n: stamps.append(time.perf_counter()) or n)
        return "done"

    with running(app):
        inst = cv.workflow("long").create()
        # Not polling status() meanwhile: it reads every step, which would load the machine more
        # as the run grows.
        wait_for(lambda: len(stamps) == STEPS, timeout=120, what=f"{STEPS} steps")
        s = settled(inst, "complete")
    assert s.output == "done" and len(s.steps) == STEPS
    assert len(stamps) == STEPS, "a step ran twice: the run was replayed"
    # One entry; a run cut short (a lease lost on a loaded machine) may enter again and replay what
    # was done, but a replay per step would enter about STEPS times.
    assert len(entries) <= 3, f"the function was entered {len(entries)} times (after steps {entries[:10]}...)"
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    first, last = statistics.median(gaps[:WINDOW]), statistics.median(gaps[-WINDOW:])
    print(f"median step cost: first {WINDOW} {first * 1e3:.2f} ms, last {WINDOW} {last * 1e3:.2f} ms")
