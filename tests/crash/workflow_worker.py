"""A worker process for the workflow crash test: runs workflow ``ledgered``, whose steps append a
line ``STEP PID`` to ``LEDGER`` (fsynced) each time their function runs.

Usage: ``workflow_worker.py URL LEDGER``. Step ``slow`` blocks for a minute the first time it runs
(a line ``slow-started PID`` tells the test it is under way, so it can SIGKILL the process); run
again, it returns at once.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import conveyor

VISIBILITY_TIMEOUT_MS = 1000


def record(ledger: Path, line: str) -> None:
    with ledger.open("a") as f:
        f.write(f"{line} {os.getpid()}\n")
        f.flush()
        os.fsync(f.fileno())


def main() -> None:
    url, ledger = sys.argv[1], Path(sys.argv[2])
    app = conveyor.App(url, grace_period=1)

    def step_fn(name: str):
        def fn() -> str:
            first = "slow-started" not in ledger.read_text() if ledger.exists() else True
            record(ledger, name)
            if name == "slow" and first:
                record(ledger, "slow-started")
                time.sleep(60)
            return name

        return fn

    @app.workflow("ledgered", visibility_timeout_ms=VISIBILITY_TIMEOUT_MS)
    def ledgered(event, step):
        out = [step.do("before", step_fn("before")), step.do("slow", step_fn("slow"))]
        return [*out, step.do("after", step_fn("after"))]

    app.run()


if __name__ == "__main__":
    main()
