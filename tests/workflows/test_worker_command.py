"""``conveyor worker module:app`` runs an app that declares only workflows, and every log line of
a run names its trace."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import conveyor
from tests.waiting import wait_for

MODULE = """
import logging

import conveyor

app = conveyor.App()
log = logging.getLogger("wfmodule")


@app.workflow("doubler")
def doubler(event, step):
    log.warning("doubling %s", event.payload)
    return step.do("double", lambda: event.payload * 2)
"""


def test_the_worker_command_runs_a_workflow_only_app(tmp_path: Path) -> None:
    (tmp_path / "wfmodule.py").write_text(MODULE)
    url = f"sqlite://{tmp_path / 'data'}"
    env = {**os.environ, "CONVEYOR_URL": url, "PYTHONPATH": str(tmp_path)}
    conveyor_command = Path(sys.executable).with_name("conveyor")
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen([str(conveyor_command), "worker", "wfmodule:app"], env=env, stdout=out, stderr=out)
    try:
        with conveyor.connect(url) as cv:
            wf = wait_for(lambda: _workflow(cv), timeout=30, what="the worker to register the workflow")
            inst = wf.create(params=21)
            wait_for(lambda: inst.status().status == "complete", timeout=30, what="the instance to complete")
            assert inst.status().output == 42
            trace_id = inst.status().trace_id
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(20) == 0, log.read_text()
    lines = log.read_text().splitlines()
    assert any("workflow doubler -> wfmodule:doubler" in line for line in lines)
    (doubling,) = [line for line in lines if "doubling 21" in line]
    assert f"wfmodule [{trace_id}]: doubling 21" in doubling


def _workflow(cv: conveyor.Conveyor) -> conveyor.workflows.Workflow | None:
    try:
        return cv.workflow("doubler")
    except conveyor.WorkflowNotFound:
        return None
