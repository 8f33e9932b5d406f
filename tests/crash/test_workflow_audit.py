"""The workflow crash audit: instances of a 20-step workflow run by worker processes that are
SIGKILLed at random, again and again, while (on PostgreSQL) the database server itself is restarted
once. Every instance completes with the right output; every step ran exactly once, but for the
steps a killed worker was running when it died (those ran again, once per such death); and no step
that had completed ever ran again.

Each step's function appends ``INSTANCE STEP PID`` to one ledger file shared by all workers
(``workflow_audit_worker.py``), before it computes, so the ledger holds every run of every step in
the order they started. The audit reads it:

- a step's runs but the last are by killed workers, and each such run was the last thing its
  worker did for that instance (it died during the step, not after going on);
- in each instance's runs the step numbers never go down: a step that ran again after a later one
  began (so after it had completed) is a completed step run again;
- a killed worker left at most as many steps to run again as it runs instances at once;
- once every instance is complete, nothing runs any more.

The size in ``make test`` is small (60 instances, 12 kills); ``CONVEYOR_WORKFLOW_AUDIT=full`` runs
the issue's 200 instances with 40 kills. PostgreSQL is a throw-away cluster of the test's own
(``tests/engine/postgres/cluster.py``), so that restarting it disturbs no one else.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import conveyor
from conveyor.workflows import Workflow
from tests.crash.workflow_audit_worker import CONCURRENCY, STEPS, WORKFLOW, expected_output
from tests.engine.postgres.cluster import Cluster
from tests.waiting import wait_for

WORKER = Path(__file__).with_name("workflow_audit_worker.py")
FULL = os.environ.get("CONVEYOR_WORKFLOW_AUDIT") == "full"
INSTANCES, KILLS = (200, 40) if FULL else (60, 12)
WORKERS_AT_ONCE = 2
# Kills stop once this share of all step runs is in the ledger: the rest runs undisturbed.
KILL_UNTIL = 0.85
# A victim dies this long (at random) after it began its first step.
LIFETIME_SECONDS = (0.0, 0.8)
FIRST_STEP_TIMEOUT = 60.0
COMPLETE_TIMEOUT = 600.0 if FULL else 180.0


@dataclass(frozen=True, slots=True)
class Run:
    """One run of one step's function, as the ledger has it; ``position`` is its line number."""

    position: int
    instance: str
    step: int
    pid: int


class AuditWorkers:
    """The worker processes of the audit; their output goes to ``logs``."""

    def __init__(self, url: str, ledger: Path, logs: Path) -> None:
        self.url, self.ledger, self.logs = url, ledger, logs
        self.alive: list[subprocess.Popen[bytes]] = []
        self.killed: set[int] = set()
        self.started = 0
        logs.mkdir(exist_ok=True)

    def start(self) -> subprocess.Popen[bytes]:
        self.started += 1
        with (self.logs / f"worker-{self.started}.log").open("wb") as output:
            process = subprocess.Popen(
                [sys.executable, str(WORKER), self.url, str(self.ledger)], stdout=output, stderr=subprocess.STDOUT
            )
        self.alive.append(process)
        return process

    def check_alive(self) -> None:
        """Fail if a worker died of itself: a crash (on the database's restart too) must not pass for a kill."""
        for process in self.alive:
            if process.poll() is not None:
                raise AssertionError(f"worker {process.pid} exited by itself ({process.returncode}); see {self.logs}")

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        process.send_signal(signal.SIGKILL)
        process.wait()
        self.alive.remove(process)
        self.killed.add(process.pid)

    def stop_all(self) -> None:
        for process in self.alive:
            process.send_signal(signal.SIGTERM)
        for process in self.alive:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.alive.clear()


def ledger_runs(ledger: Path) -> list[Run]:
    """Every run in the ledger; a line cut short by a kill still names its run."""
    if not ledger.exists():
        return []
    runs = []
    for position, line in enumerate(ledger.read_text().splitlines()):
        instance, step, pid = line.split()
        runs.append(Run(position, instance, int(step), int(pid)))
    return runs


def audit_problems(runs: list[Run], killed: set[int]) -> list[str]:
    """What the ledger shows that the semantics do not allow (see the module's docstring)."""
    problems = []
    by_instance: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_instance[run.instance].append(run)
    interrupted_by: dict[int, int] = defaultdict(int)
    for instance, seen in sorted(by_instance.items()):
        steps = [r.step for r in seen]
        if steps != sorted(steps):
            problems.append(f"{instance}: a step ran again after a later step had begun: {steps}")
        if sorted(set(steps)) != list(range(STEPS)):
            problems.append(f"{instance}: the steps that ran are {sorted(set(steps))}")
        last_of_pid = {r.pid: r for r in seen}
        for earlier, later in itertools.pairwise(seen):
            if earlier.step != later.step:
                continue
            if earlier.pid not in killed:
                problems.append(f"{instance}: step {earlier.step} ran again though worker {earlier.pid} was not killed")
            elif last_of_pid[earlier.pid] != earlier:
                problems.append(
                    f"{instance}: step {earlier.step} ran again though worker {earlier.pid} went on after it"
                )
            interrupted_by[earlier.pid] += 1
    for pid, count in sorted(interrupted_by.items()):
        if count > CONCURRENCY:
            problems.append(f"worker {pid} died during {count} steps; it ran only {CONCURRENCY} instances at once")
    return problems


@pytest.fixture(params=["sqlite", "postgres"])
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Cluster | None]]:
    """The deployment's URL, and on PostgreSQL the test's own cluster (which it may restart)."""
    if request.param == "sqlite":
        yield f"sqlite://{tmp_path / 'data'}", None
        return
    cluster = Cluster.start()
    try:
        yield cluster.url, cluster
    finally:
        cluster.stop()


def count_complete(wf: Workflow) -> int:
    complete, cursor = 0, None
    while True:
        page = wf.list_instances(status="complete", per_page=100, cursor=cursor)
        complete += len(page.instances)
        if page.cursor is None:
            return complete
        cursor = page.cursor


def kill_while_working(
    workers: AuditWorkers, ledger: Path, cluster: Cluster | None, rng: random.Random
) -> tuple[int, bool]:
    """SIGKILL the oldest worker at a random moment after it began a step and start another, until
    ``KILLS`` kills or ``KILL_UNTIL`` of the work is done; the cluster restarts once, halfway.
    Returns the number of kills made while work remained and whether the database was restarted."""
    total = INSTANCES * STEPS
    restarted = False
    while len(workers.killed) < KILLS:
        while len(workers.alive) < WORKERS_AT_ONCE:
            workers.start()
        victim = workers.alive[0]
        deadline = time.monotonic() + FIRST_STEP_TIMEOUT
        while not any(r.pid == victim.pid for r in ledger_runs(ledger)):
            workers.check_alive()
            runs = ledger_runs(ledger)
            if len(runs) >= KILL_UNTIL * total:
                return len(workers.killed), restarted
            assert time.monotonic() < deadline, f"worker {victim.pid} began no step; see {workers.logs}"
            time.sleep(0.02)
        if len(ledger_runs(ledger)) >= KILL_UNTIL * total:
            break
        time.sleep(rng.uniform(*LIFETIME_SECONDS))
        workers.check_alive()
        workers.kill(victim)
        workers.start()
        if cluster is not None and not restarted and len(workers.killed) >= KILLS // 2:
            cluster.restart()  # every connection is cut while workers run and steps commit
            restarted = True
    return len(workers.killed), restarted


@pytest.mark.timeout(COMPLETE_TIMEOUT + 600)
def test_workflow_crash_audit_every_instance_completes_and_only_interrupted_steps_run_again(
    deployment: tuple[str, Cluster | None], tmp_path: Path, rng: random.Random
) -> None:
    url, cluster = deployment
    ledger = tmp_path / "ledger"
    workers = AuditWorkers(url, ledger, tmp_path / "logs")
    started = time.monotonic()
    with conveyor.connect(url) as cv:
        try:
            workers.start()
            wf = wait_for(lambda: _workflow(cv), timeout=60, what="a worker to register the workflow")
            for first in range(0, INSTANCES, 100):
                items = [{"id": f"i{n}", "params": {"seed": n}} for n in range(first, min(first + 100, INSTANCES))]
                assert wf.create_batch(items).errors == []
            kills, restarted = kill_while_working(workers, ledger, cluster, rng)
            while len(workers.alive) < WORKERS_AT_ONCE:
                workers.start()
            wait_for(
                lambda: workers.check_alive() or count_complete(wf) == INSTANCES,
                timeout=COMPLETE_TIMEOUT,
                what=f"all {INSTANCES} instances to complete",
                poll=0.5,
            )
            settled = len(ledger_runs(ledger))
            time.sleep(1.0)  # the workers go on running: nothing may run after completion
            after = ledger_runs(ledger)
            workers.check_alive()
        finally:
            workers.stop_all()
        statuses = {n: wf.get(f"i{n}").status() for n in range(INSTANCES)}

    assert kills >= KILLS // 2, f"only {kills} workers were killed while work was left: the test tested little"
    assert cluster is None or restarted, "the database was never restarted"
    wrong = {
        n: (s.status, s.output) for n, s in statuses.items() if (s.status, s.output) != ("complete", expected_output(n))
    }
    assert wrong == {}, "instances with a wrong status or output"
    for n, s in statuses.items():
        assert [(r.name, r.success) for r in s.steps] == [(f"s{k}-1", True) for k in range(STEPS)], n
    assert after[settled:] == [], "steps ran after every instance had completed"
    assert audit_problems(after, workers.killed) == []
    again = len(after) - INSTANCES * STEPS
    print(
        f"{INSTANCES} instances x {STEPS} steps on {'PostgreSQL' if cluster else 'SQLite'}: {kills} workers killed"
        f"{', the database restarted once' if restarted else ''}; {again} steps ran again after a kill; "
        f"{time.monotonic() - started:.1f} s"
    )


def _workflow(cv: conveyor.Conveyor) -> Workflow | None:
    try:
        return cv.workflow(WORKFLOW)
    except conveyor.WorkflowNotFound:
        return None
