"""The peers' side of ``bench_peers.py``, run by the Python of the peers' own environment (.peers/).

``python peer_workloads.py SYSTEM DIRECTORY COUNT`` enqueues COUNT one-KB JSON bodies one at a
time (neither peer has a batch enqueue), then one worker processes and acks them all, and prints one
JSON object: the seconds of each phase and the durability settings it ran with. With a fourth
argument ``enqueue-only`` it stops after the enqueues (``flush_counts.py`` counts their flushes). It
imports nothing of Conveyor, only the shared body from ``harness``.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness import body


def huey_workload(directory: Path, count: int, enqueue_only: bool = False) -> dict[str, Any]:
    """Huey's SqliteHuey with ``fsync=True`` (synchronous=FULL, WAL): a task call per message, one worker thread."""
    from huey import SqliteHuey  # type: ignore[import-not-found]
    from huey.signals import SIGNAL_COMPLETE  # type: ignore[import-not-found]

    huey = SqliteHuey("bench", filename=str(directory / "huey.db"), fsync=True)
    done = threading.Event()
    completed = 0

    @huey.task()  # type: ignore[untyped-decorator]
    def noop(payload: dict[str, Any]) -> None:
        return None

    @huey.signal(SIGNAL_COMPLETE)  # type: ignore[untyped-decorator]
    def count_completed(signal: str, task: object) -> None:
        nonlocal completed
        completed += 1
        if completed >= count:
            done.set()

    bodies = [body(i) for i in range(count)]
    started = time.perf_counter()
    for payload in bodies:
        noop(payload)
    enqueued = time.perf_counter()
    if enqueue_only:
        return {"enqueue_seconds": enqueued - started}
    consumer = huey.create_consumer(
        workers=1, worker_type="thread", periodic=False, initial_delay=0.001, check_worker_health=False
    )
    consumer.start()
    done.wait()
    finished = time.perf_counter()
    consumer.stop(graceful=True)
    journal = sqlite3.connect(directory / "huey.db").execute("PRAGMA journal_mode").fetchone()[0]
    return {
        "enqueue_seconds": enqueued - started,
        "consume_seconds": finished - enqueued,
        "settings": {"fsync": True, "synchronous": "FULL", "journal_mode": journal},
    }


def persist_queue_workload(directory: Path, count: int, enqueue_only: bool = False) -> dict[str, Any]:
    """persist-queue's SQLiteAckQueue (WAL, a commit per put, get and ack): one worker thread."""
    from persistqueue import SQLiteAckQueue  # type: ignore[import-not-found]

    queue = SQLiteAckQueue(str(directory / "persist"), multithreading=True, auto_commit=True)
    synchronous = queue._getter.execute("PRAGMA synchronous").fetchone()[0]
    journal = queue._getter.execute("PRAGMA journal_mode").fetchone()[0]
    bodies = [body(i) for i in range(count)]
    started = time.perf_counter()
    for payload in bodies:
        queue.put(payload)
    enqueued = time.perf_counter()
    if enqueue_only:
        return {"enqueue_seconds": enqueued - started}
    taken = 0

    def worker() -> None:
        nonlocal taken
        while taken < count:
            item = queue.get(block=True, timeout=30)
            queue.ack(item)
            taken += 1

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    finished = time.perf_counter()
    return {
        "enqueue_seconds": enqueued - started,
        "consume_seconds": finished - enqueued,
        "settings": {"synchronous": {2: "FULL", 1: "NORMAL", 0: "OFF"}.get(synchronous), "journal_mode": journal},
    }


WORKLOADS = {"huey": huey_workload, "persist-queue": persist_queue_workload}


def main() -> None:
    system, directory, count = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    enqueue_only = sys.argv[4:] == ["enqueue-only"]
    print(json.dumps(WORKLOADS[system](directory, count, enqueue_only)), flush=True)


if __name__ == "__main__":
    main()
