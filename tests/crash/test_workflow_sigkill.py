"""A worker SIGKILLed in the middle of a step: the instance's message comes back after its lease,
another worker takes the run over, the interrupted step runs again, the completed one does not."""

from __future__ import annotations

import collections
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import conveyor
from tests.engine.postgres.support import drop_schema, new_schema, schema_url
from tests.waiting import wait_for

WORKER = Path(__file__).with_name("workflow_worker.py")


def _start(url: str, ledger: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, str(WORKER), url, str(ledger)], stdout=out, stderr=subprocess.STDOUT)


def _lines(ledger: Path) -> list[list[str]]:
    return [line.split() for line in ledger.read_text().splitlines()] if ledger.exists() else []


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_worker_killed_mid_step_is_taken_over_and_the_step_runs_again(tmp_path: Path, engine: str) -> None:
    schema = new_schema()
    url = f"sqlite://{tmp_path / 'data'}" if engine == "sqlite" else schema_url(schema)
    ledger, log = tmp_path / "ledger", tmp_path / "workers.log"
    first = _start(url, ledger, log)
    second = None
    cv = conveyor.connect(url)
    try:
        wait_for(lambda: _try_workflow(cv), timeout=30, what="the worker to register the workflow")
        inst = cv.workflow("ledgered").create(id="victim")
        wait_for(lambda: any(line[0] == "slow-started" for line in _lines(ledger)), timeout=30, what="the slow step")
        # Past a second, the attempt is recorded as under way: its interruption then shows.
        wait_for(lambda: len(inst.status().steps) == 2, timeout=30, what="the slow step's attempt to show")
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        assert inst.status().status == "running"
        second = _start(url, ledger, log)
        wait_for(lambda: inst.status().status == "complete", timeout=60, what="the instance to complete")
        s = inst.status()
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(10)
        cv.close()
        if engine == "postgres":
            drop_schema(schema)
    assert s.output == ["before", "slow", "after"]
    slow = s.steps[1]
    assert [(a.success, (a.error or {}).get("name")) for a in slow.attempts] == [(False, "WorkerLost"), (True, None)]
    runs = collections.Counter(line[0] for line in _lines(ledger))
    assert runs == {"before": 1, "slow": 2, "slow-started": 1, "after": 1}, log.read_text()
    pids = {line[0]: line[1] for line in _lines(ledger) if line[0] in ("before", "after")}
    assert pids["before"] == str(first.pid) and pids["after"] == str(second.pid)


def _try_workflow(cv: conveyor.Conveyor) -> bool:
    try:
        cv.workflow("ledgered")
    except conveyor.WorkflowNotFound:
        return False
    return True
