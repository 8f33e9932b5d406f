"""The DBOS side of ``bench_workflows.py``, run in DBOS's own environment (``.tools/dbos-peer``).

Usage: ``dbos_workloads.py DIRECTORY COUNT``; prints one JSON object: seconds for ``COUNT``
10-step workflows run one after another (its steps/s), for ``COUNT`` 1-step workflows run one after
another (its workflows/s called directly), and for ``COUNT`` 1-step workflows enqueued on a DBOS
queue and awaited (its workflows/s through its queue). The system database is SQLite in
``DIRECTORY`` with DBOS's defaults (each step's output a committed row). The steps return the same
small JSON value as Conveyor's.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

from dbos import DBOS, DBOSConfig

STEPS = 10
RESULT = "ok"


def main() -> None:
    directory, count = Path(sys.argv[1]), int(sys.argv[2])
    config: DBOSConfig = {
        "name": "bench",
        "system_database_url": f"sqlite:///{directory / 'dbos.sqlite'}",
        "log_level": "WARNING",
    }
    logging.getLogger("dbos").setLevel(logging.WARNING)
    DBOS(config=config)

    @DBOS.step()
    def noop() -> str:
        return RESULT

    @DBOS.workflow()
    def one_step() -> str:
        return noop()

    @DBOS.workflow()
    def ten_steps() -> str:
        for _ in range(STEPS):
            noop()
        return RESULT

    DBOS.launch()
    queue = DBOS.register_queue("bench")
    try:
        one_step()  # the first call pays for warming up
        started = time.perf_counter()
        for _ in range(count):
            ten_steps()
        ten_seconds = time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(count):
            one_step()
        one_seconds = time.perf_counter() - started
        started = time.perf_counter()
        handles = [queue.enqueue(one_step) for _ in range(count)]
        for handle in handles:
            handle.get_result()
        queued_seconds = time.perf_counter() - started
    finally:
        DBOS.destroy()
    print(
        json.dumps(
            {
                "ten_step_seconds": ten_seconds,
                "one_step_seconds": one_seconds,
                "queued_seconds": queued_seconds,
                "count": count,
                "settings": {"system_database": "sqlite (DBOS defaults)", "queue": "default polling"},
            }
        )
    )


if __name__ == "__main__":
    main()
