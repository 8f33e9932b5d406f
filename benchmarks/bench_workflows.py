"""Workflows (issue 12): what a durable step costs, against a durable send and against DBOS; long
runs; sleeping instances; two PostgreSQL workers against one.

Each measurement is a JSON line (``harness.emit``); each ratio compares figures taken in this run:

- **step ÷ send**: one instance of no-op ``step.do`` steps (each result ``"ok"`` stored durably): the
  p50 cost of a step (between consecutive step functions, so it holds the previous step's write)
  against the p50 of one durable ``send()`` of the same bytes, in rounds taking turns. Target ≤ 1.5.
- **DBOS** (``dbos`` at a pinned version, installed by this script into ``.tools/dbos-peer`` with
  the project's pinned ``uv``; ``dbos_workloads.py`` runs there, SQLite system database): 10-step
  workflows one after another (steps/s) and 1-step workflows, called and through its queue
  (workflows/s). Conveyor does the same through its queue, one instance at a time
  (``concurrency=1``), and at its default concurrency. Target: Conveyor ≥ 5 × DBOS in both.
  1,000 of each: Conveyor's 200 took 0.2 s, a window in which this VM's CPU speed swings by a
  fifth and the first instance's start (10-20 ms after the create) is a tenth of the run.
- **a 10,000-step instance**: the mean cost of its last 100 steps ÷ its first 100. Target ≤ 1.5.
- **sleeping instances**: 10,000 instances sleeping until times spread over 120 s: the threads
  they hold (none), the p99 lateness of their wake-ups (the first code of the waking run against
  the time asked for), against 2 × the queue's idle send → handler p50 + 20 ms measured alike;
  then 1,000 due at one moment: the time until the last one starts. Target ≤ 2 s.
- **PostgreSQL, two workers ÷ one**: 1,000 instances of 3 steps that each wait 50 ms on I/O,
  ``concurrency=8`` per worker process; instances per second with two worker processes ÷ one, and
  how many steps ran twice (from a ledger every step appends to). Target ≥ 1.8 and 0.

``--quick`` runs small counts.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import conveyor  # noqa: E402
from conveyor.workflows.execution import WorkflowHandler  # noqa: E402
from harness import arguments, emit, percentile, quiet_logs, ratio, scratch_directory  # noqa: E402

ROOT = HERE.parent
UV = ROOT / ".tools" / "bin" / "uv"
DBOS_ENV = ROOT / ".tools" / "dbos-peer"
DBOS_PIN = "dbos==3.4.0"
RESULT = "ok"
IO_SECONDS = 0.05
PG_CONCURRENCY = 8


def at_most(name: str, value: float, limit: float, n: int, **params: Any) -> None:
    """A ratio held against a ceiling (``harness.ratio`` holds against a floor)."""
    emit(name, value, "ratio", n, target=f"<= {limit}", met=value <= limit, **params)


def wait(condition: Any, timeout: float, what: str, poll: float = 0.01) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(poll)


def statuses(directory: Path) -> Counter[str]:
    """Instances by status, read straight from a SQLite deployment's workflows.db."""
    conn = sqlite3.connect(f"file:{directory / 'workflows.db'}?mode=ro", uri=True, timeout=30)
    try:
        return Counter(dict(conn.execute("SELECT status, count(*) FROM workflow_instances GROUP BY status")))
    finally:
        conn.close()


# -- a step against a send ----------------------------------------------------------------------
def step_costs(directory: Path, steps: int) -> list[float]:
    """Seconds between consecutive no-op steps of one instance (each holds one durable step record)."""
    cv = conveyor.connect(f"sqlite://{directory}")
    app = conveyor.App(cv)
    stamps: list[float] = []

    def noop() -> str:
        stamps.append(time.perf_counter())
        return RESULT

    @app.workflow("noop-steps", max_steps=steps)
    def run(event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> str:
        for n in range(steps):
            step.do(f"s{n}", noop)
        return RESULT

    app.start()
    try:
        cv.workflow("noop-steps").create()
        wait(lambda: len(stamps) == steps, 600, f"{steps} steps")
    finally:
        app.stop()
        cv.close()
    return [b - a for a, b in itertools.pairwise(stamps)]


def send_costs(directory: Path, sends: int) -> list[float]:
    cv = conveyor.connect(f"sqlite://{directory}")
    q = cv.create_queue("sends")
    costs = []
    for _ in range(sends):
        started = time.perf_counter()
        q.send(RESULT)
        costs.append(time.perf_counter() - started)
    cv.close()
    return costs


def step_against_send(rounds: int, per_round: int) -> None:
    steps: list[float] = []
    sends: list[float] = []
    for r in range(rounds):
        for kind in ("step", "send") if r % 2 == 0 else ("send", "step"):
            with scratch_directory(f"wf-{kind}") as directory:
                (steps if kind == "step" else sends).extend(
                    step_costs(directory, per_round) if kind == "step" else send_costs(directory, per_round)
                )
    for name, costs in (("workflow_step_record", steps), ("workflow_send_same_bytes", sends)):
        emit(f"{name}_p50", statistics.median(costs) * 1e3, "ms", len(costs))
        emit(f"{name}_p99", percentile(costs, 99) * 1e3, "ms", len(costs))
    at_most(
        "workflow_step_p50_vs_send_p50",
        statistics.median(steps) / statistics.median(sends),
        1.5,
        len(steps),
        rounds=rounds,
        result_bytes=len(json.dumps(RESULT)),
    )


# -- DBOS ---------------------------------------------------------------------------------------
def dbos_python() -> Path:
    """DBOS's own environment (made once with the project's pinned uv, remade if the pin changed)."""
    python = DBOS_ENV / "bin" / "python"
    marker = DBOS_ENV / "pin.txt"
    if python.exists() and marker.exists() and marker.read_text() == DBOS_PIN:
        return python
    subprocess.run([str(UV), "venv", "--quiet", "--clear", "--python", sys.executable, str(DBOS_ENV)], check=True)
    subprocess.run([str(UV), "pip", "install", "--quiet", "--python", str(python), DBOS_PIN], check=True)
    marker.write_text(DBOS_PIN)
    return python


def run_dbos(count: int) -> dict[str, Any]:
    with scratch_directory("dbos") as directory:
        done = subprocess.run(
            [str(dbos_python()), str(HERE / "dbos_workloads.py"), str(directory), str(count)],
            capture_output=True,
            text=True,
            timeout=1800,
        )
    if done.returncode != 0:
        raise RuntimeError(f"the DBOS workload failed ({done.returncode}):\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def last_end_ms(directory: Path) -> int:
    """When the last instance of a SQLite deployment ended, as its store recorded it (ms)."""
    conn = sqlite3.connect(f"file:{directory / 'workflows.db'}?mode=ro", uri=True, timeout=30)
    try:
        return int(conn.execute("SELECT max(ended_ms) FROM workflow_instances").fetchone()[0])
    finally:
        conn.close()


def conveyor_workflows(count: int, steps: int, concurrency: int | None) -> float:
    """Seconds for ``count`` instances of a ``steps``-step workflow, created at once and run by one
    worker (``concurrency`` None: its default, scaled with the backlog), from the create to the last
    one's end as the store recorded it (not when a poll saw it: a poll every 20 ms added ~10 ms to
    runs of 150-300 ms). One instance first warms the worker up, as DBOS's side warms up with one call."""
    with scratch_directory("wf-peer") as directory:
        cv = conveyor.connect(f"sqlite://{directory}")
        app = conveyor.App(cv)

        @app.workflow("peer", concurrency=concurrency)
        def run(event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> str:
            for n in range(steps):
                step.do(f"s{n}", lambda: RESULT)
            return RESULT

        app.start()
        try:
            wf = cv.workflow("peer")
            wf.create(id="warm-up")
            wait(lambda: statuses(directory)["complete"] == 1, 60, "the warm-up instance")
            started = time.time()
            for first in range(0, count, 100):
                wf.create_batch([{} for _ in range(min(100, count - first))])
            wait(lambda: statuses(directory)["complete"] == count + 1, 600, f"{count} instances", poll=0.02)
            return last_end_ms(directory) / 1000 - started
        finally:
            app.stop()
            cv.close()


def against_dbos(count: int) -> None:
    """Sequential against sequential (``concurrency=1`` against DBOS's direct calls), and each
    through its queue at its default concurrency (against the better of DBOS's two)."""
    dbos = run_dbos(count)
    dbos_steps = 10 * count / dbos["ten_step_seconds"]
    dbos_called, dbos_queued = count / dbos["one_step_seconds"], count / dbos["queued_seconds"]
    emit("workflow_dbos_steps_per_s", dbos_steps, "steps/s", 10 * count, pin=DBOS_PIN, **dbos["settings"])
    emit("workflow_dbos_ms_per_step", 1e3 / dbos_steps, "ms", 10 * count, pin=DBOS_PIN)
    emit("workflow_dbos_workflows_per_s_called", dbos_called, "workflows/s", count, pin=DBOS_PIN)
    emit("workflow_dbos_workflows_per_s_queued", dbos_queued, "workflows/s", count, pin=DBOS_PIN)
    for concurrency, label in ((1, "sequential"), (None, "default_concurrency")):
        ours_steps = 10 * count / conveyor_workflows(count, 10, concurrency)
        ours_workflows = count / conveyor_workflows(count, 1, concurrency)
        emit(f"workflow_conveyor_steps_per_s_{label}", ours_steps, "steps/s", 10 * count, workflow="10 steps")
        emit(f"workflow_conveyor_workflows_per_s_{label}", ours_workflows, "workflows/s", count, workflow="1 step")
        ratio(f"workflow_steps_per_s_vs_dbos_{label}", ours_steps, dbos_steps, 10 * count, target=5.0)
        theirs = dbos_called if concurrency == 1 else max(dbos_called, dbos_queued)
        ratio(f"workflow_workflows_per_s_vs_dbos_{label}", ours_workflows, theirs, count, target=5.0)


# -- a long instance ----------------------------------------------------------------------------
def long_instance(steps: int) -> None:
    with scratch_directory("wf-long") as directory:
        costs = step_costs(directory, steps)
    first, last = statistics.fmean(costs[:100]), statistics.fmean(costs[-100:])
    emit("workflow_long_first_100_mean", first * 1e3, "ms", 100, steps=steps)
    emit("workflow_long_last_100_mean", last * 1e3, "ms", 100, steps=steps)
    emit("workflow_long_first_100_median", statistics.median(costs[:100]) * 1e3, "ms", 100, steps=steps)
    emit("workflow_long_last_100_median", statistics.median(costs[-100:]) * 1e3, "ms", 100, steps=steps)
    at_most("workflow_long_last_vs_first_100", last / first, 1.5, steps)


# -- sleeping instances -------------------------------------------------------------------------
def idle_latencies(cv: conveyor.Conveyor, seen: list[float], count: int) -> list[float]:
    q = cv.queue("idle")
    for i in range(count):
        time.sleep(0.03)
        q.send({"sent": time.time()})
        wait(lambda i=i: len(seen) > i, 30, "the idle message")
    return seen


def threads_in_workflow_runs() -> int:
    """Threads now inside a workflow's run (``WorkflowHandler.advance``), of every thread of the process."""
    return sum(
        any(f.f_code is WorkflowHandler.advance.__code__ for f, _ in traceback.walk_stack(frame))
        for frame in sys._current_frames().values()
    )


def sleepers(count: int, spread: float, together: int) -> None:
    with scratch_directory("wf-sleep") as directory:
        cv = conveyor.connect(f"sqlite://{directory}")
        cv.create_queue("idle")
        app = conveyor.App(cv)
        woke: dict[str, float] = {}
        seen: list[float] = []

        @app.consumer("idle", max_batch_size=1, max_batch_timeout=0)
        def idle(batch: conveyor.MessageBatch) -> None:
            now = time.time()
            seen.extend(now - m.body["sent"] for m in batch.messages)

        @app.workflow("sleepers")
        def sleeper(event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> None:
            now = time.time()
            if now >= event.payload["wake"]:
                woke.setdefault(event.instance_id, now)
            step.sleep_until("nap", event.payload["wake"])

        app.start()
        try:
            latency = statistics.median(idle_latencies(cv, seen, 100))
            idle_threads = threading.active_count()
            wf = cv.workflow("sleepers")
            # Every instance runs once to fall asleep before the first is due.
            lead = 10 + count / 80
            start = time.time() + lead
            wakes = {f"s{n}": start + spread * n / count for n in range(count)}
            wakes |= {f"t{n}": start + spread + 10 for n in range(together)}
            created = time.perf_counter()
            items = [{"id": i, "params": {"wake": w}} for i, w in wakes.items()]
            for first in range(0, len(items), 100):
                wf.create_batch(items[first : first + 100])
            wait(lambda: statuses(directory)["waiting"] == len(wakes), lead, "every instance to sleep", poll=0.2)
            emit("workflow_sleepers_asleep_after", time.perf_counter() - created, "s", len(wakes))
            emit("workflow_sleepers_threads_held", threads_in_workflow_runs(), "threads", len(wakes))
            emit(
                "workflow_sleepers_process_threads_added",
                threading.active_count() - idle_threads,
                "threads",
                len(wakes),
                note="idle handler threads the burst of first runs started (a pool, not one per instance)",
            )
            last_due = max(wakes.values()) - time.time()  # the wait runs from now, not from the first wake
            wait(lambda: len(woke) == len(wakes), last_due + 60, "every instance to wake", poll=0.2)
        finally:
            app.stop()
            cv.close()
    lateness = [woke[i] - wakes[i] for i in wakes if i.startswith("s")]
    last_together = max(woke[i] for i in wakes if i.startswith("t")) - wakes["t0"]
    emit("workflow_idle_send_to_handler_p50", latency * 1e3, "ms", 100)
    emit("workflow_wake_lateness_p50", statistics.median(lateness) * 1e3, "ms", count, spread_s=spread)
    emit("workflow_wake_lateness_p99", percentile(lateness, 99) * 1e3, "ms", count, spread_s=spread)
    limit = 2 * latency + 0.020
    emit(
        "workflow_wake_lateness_p99_vs_limit",
        percentile(lateness, 99) / limit,
        "ratio",
        count,
        target="<= 1 (2 x idle p50 + 20 ms)",
        met=percentile(lateness, 99) <= limit,
    )
    emit("workflow_due_together_last_start", last_together, "s", together, target="<= 2", met=last_together <= 2)


# -- PostgreSQL: two workers against one ------------------------------------------------------------
def pg_worker(url: str, ledger_path: str) -> None:
    """The worker process of the scaling measurement: each step waits 50 ms, then logs ``INSTANCE STEP``."""
    ledger = os.open(ledger_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    app = conveyor.App(url)

    def io(instance: str, n: int) -> str:
        time.sleep(IO_SECONDS)
        os.write(ledger, f"{instance} {n}\n".encode())
        return RESULT

    @app.workflow("io3", concurrency=PG_CONCURRENCY)
    def run(event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> str:
        for n in range(3):
            step.do(f"io{n}", lambda n=n: io(event.instance_id, n))
        return RESULT

    app.run()


def pg_rate(url: str, workers: int, count: int, directory: Path) -> tuple[float, int]:
    """Instances per second with ``workers`` worker processes, and the steps that ran twice."""
    import psycopg

    ledger, log = directory / f"ledger-{workers}", directory / f"workers-{workers}.log"
    with log.open("ab") as output:
        processes = [
            subprocess.Popen([sys.executable, __file__, "--worker", url, str(ledger)], stderr=output)
            for _ in range(workers)
        ]
    try:
        with conveyor.connect(url) as cv:
            try:
                wait(lambda: _has_workflow(cv, "io3"), 60, "the workers to register io3", poll=0.1)
            except RuntimeError:
                raise RuntimeError(f"no worker registered io3:\n{log.read_text()[-3000:]}") from None
            time.sleep(2)  # every worker's dispatcher is up
            wf = cv.workflow("io3")
            with psycopg.connect(url) as conn:
                started = time.perf_counter()
                for first in range(0, count, 100):
                    wf.create_batch([{} for _ in range(min(100, count - first))])

                def complete() -> bool:
                    row = conn.execute("SELECT count(*) FROM workflow_instances WHERE status = 'complete'").fetchone()
                    conn.commit()
                    return row is not None and row[0] == count

                wait(complete, 600, f"{count} instances", poll=0.02)
                seconds = time.perf_counter() - started
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(timeout=30)
    runs = Counter(ledger.read_text().splitlines())
    assert len(runs) == 3 * count, f"{len(runs)} distinct steps ran, not {3 * count}"
    return count / seconds, sum(n - 1 for n in runs.values())


def _has_workflow(cv: conveyor.Conveyor, name: str) -> bool:
    try:
        cv.workflow(name)
    except conveyor.WorkflowNotFound:
        return False
    return True


def postgres_scaling(count: int) -> None:
    from bench_postgres import scratch_schema

    rates: dict[int, float] = {}
    twice = 0
    with scratch_directory("wf-pg") as directory:
        for workers in (1, 2):
            with scratch_schema("workflows") as url:
                rates[workers], again = pg_rate(url, workers, count, directory)
                twice += again
                emit(f"workflow_pg_{workers}_workers", rates[workers], "instances/s", count, concurrency=PG_CONCURRENCY)
    ratio("workflow_pg_two_workers_vs_one", rates[2], rates[1], count, target=1.8, step_io_s=IO_SECONDS)
    emit("workflow_pg_steps_run_twice", twice, "steps", 3 * count * 2, target=0, met=twice == 0)


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        pg_worker(sys.argv[2], sys.argv[3])
        return
    args = arguments(__doc__ or "")
    quiet_logs()
    quick = args.quick
    step_against_send(rounds=1 if quick else 4, per_round=200 if quick else 500)
    against_dbos(20 if quick else 1_000)
    long_instance(1_000 if quick else 10_000)
    sleepers(300 if quick else 10_000, spread=10 if quick else 120, together=100 if quick else 1_000)
    postgres_scaling(100 if quick else 1_000)


if __name__ == "__main__":
    main()
