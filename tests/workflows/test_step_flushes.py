"""On SQLite a step's result commits without its flush, which the run's next attempt (or its end,
or its suspension) waits for: a step is on disk before any later step's function runs, and a
1-step instance pays one flush, for its end."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

import conveyor
from tests.workflows.support import running, settled


def test_each_step_is_flushed_before_the_next_runs_and_the_end_flushes_the_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cv = conveyor.connect(f"sqlite://{tmp_path / 'data'}")
    app = conveyor.App(cv, grace_period=5)
    flushes: list[int] = []  # threads that flushed workflows.db's log, in order
    real_fdatasync = os.fdatasync

    def counted_fdatasync(fd: int) -> None:
        real_fdatasync(fd)
        if os.readlink(f"/proc/self/fd/{fd}").endswith("workflows.db-wal"):
            flushes.append(threading.get_ident())

    seen: list[int] = []  # flushes so far, as each step's function starts

    def note(n: int) -> int:
        seen.append(len(flushes))
        return n

    @app.workflow("three")
    def three(event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> list[int]:
        run_thread.append(threading.get_ident())
        return [step.do(f"s{n}", lambda n=n: note(n)) for n in range(3)]

    run_thread: list[int] = []
    try:
        with running(app):
            monkeypatch.setattr(os, "fdatasync", counted_fdatasync)
            inst = cv.workflow("three").create(id="one")
            status = settled(inst, "complete")
        # Read once the worker has stopped: the end is seen as soon as it commits, before its flush.
        # A flush (the run's own, or another writer's that covered the step) between steps, and the
        # run's own: at most one a step boundary, plus its end's (which is the last step's too).
        assert seen[0] < seen[1] < seen[2] < len(flushes)
        assert flushes[seen[0] :].count(run_thread[0]) <= 3
        assert status.output == [0, 1, 2]
        assert [s.success for s in status.steps] == [True, True, True]
    finally:
        cv.close()
