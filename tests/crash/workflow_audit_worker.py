"""A worker process for the workflow crash audit: runs workflow ``audit``, whose 20 steps each
append a line ``INSTANCE STEP PID`` to the shared ``LEDGER`` file before they compute.

Usage: ``workflow_audit_worker.py URL LEDGER``. Instance params ``{"seed": s}``; step ``k`` returns
``chain(previous, k)`` (the seed before step 0), and the instance's output is the last step's
value, so a step replayed with a wrong stored value shows in the output.

The ledger is opened ``O_APPEND`` and each line goes out in one ``write``: lines of every process
stay whole and in the order they were written, which is what the audit reads. It is not fsynced:
the test kills processes, not the machine, and a killed process's writes are in the page cache.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import conveyor

WORKFLOW = "audit"
STEPS = 20
CONCURRENCY = 4
# Longer than a PostgreSQL restart takes, so a live worker keeps its leases through it; short
# enough that the instances of a killed worker come back soon.
VISIBILITY_TIMEOUT_MS = 3000
# The step's work, after its line: most kills land inside a step.
STEP_SECONDS = 0.04


def chain(previous: int, k: int) -> int:
    return (previous * 31 + k + 1) % 1_000_003


def expected_output(seed: int) -> int:
    value = seed
    for k in range(STEPS):
        value = chain(value, k)
    return value


def main() -> None:
    url, ledger_path = sys.argv[1], sys.argv[2]
    pid = os.getpid()
    ledger = os.open(ledger_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    app = conveyor.App(url, grace_period=1)

    def step_body(instance: str, k: int, previous: int) -> Any:
        def body() -> int:
            os.write(ledger, f"{instance} {k} {pid}\n".encode())
            time.sleep(STEP_SECONDS)
            return chain(previous, k)

        return body

    @app.workflow(WORKFLOW, concurrency=CONCURRENCY, visibility_timeout_ms=VISIBILITY_TIMEOUT_MS)
    def audit(event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> int:
        value = int(event.payload["seed"])
        for k in range(STEPS):
            value = step.do(f"s{k}", step_body(event.instance_id, k, value))
        return value

    app.run()


if __name__ == "__main__":
    main()
