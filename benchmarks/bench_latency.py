"""Latency on an idle queue: from ``send()`` to the handler starting, in one process and across two.

The producer puts ``time.time()`` in the body just before it sends; the handler subtracts it from
its own ``time.time()`` as it starts (one machine, one clock). Sends are spaced out so that the queue
is idle before each one. In one process the producer and the worker share one ``Conveyor``
(``App(cv)``), so a send wakes the worker directly; across processes (and between two ``Conveyor``
objects in one process, measured too) the worker notices commits by polling SQLite's data_version.
The comparison is the floor a durable send cannot beat: one raw SQLite commit (WAL,
synchronous=FULL) of the same row, measured in the same run.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import conveyor
from harness import (
    arguments,
    body,
    emit,
    percentile,
    quiet_logs,
    raw_connection,
    raw_insert_batch,
    raw_rows,
    scratch_directory,
)

# Time between sends: long enough for the worker to go idle (waiting), short enough to keep it brisk.
GAP_SECONDS = 0.03


class Stopwatch:
    """Collects send → handler-start latencies; ``wait_for(n)`` returns once ``n`` have arrived."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self._cond = threading.Condition()

    def handler(self, batch: conveyor.MessageBatch) -> None:
        now = time.time()
        with self._cond:
            self.latencies.extend(now - m.body["sent"] for m in batch.messages)
            self._cond.notify_all()

    def wait_for(self, count: int, timeout: float = 60.0) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.latencies) >= count, timeout):
                raise RuntimeError(f"only {len(self.latencies)} of {count} messages arrived in {timeout} s")


def worker(deployment: conveyor.Conveyor | str, stopwatch: Stopwatch) -> conveyor.App:
    app = conveyor.App(deployment)
    app.consumer("latency", max_batch_size=1, max_batch_timeout=0)(stopwatch.handler)
    return app


def in_process(directory: Path, count: int, *, shared: bool) -> list[float]:
    url = f"sqlite://{directory / ('shared' if shared else 'separate')}"
    cv = conveyor.connect(url)
    q = cv.create_queue("latency")
    stopwatch = Stopwatch()
    # Shared: one Conveyor for producer and worker, as in `App(cv)`; a send wakes the worker directly.
    app = worker(cv if shared else url, stopwatch)
    app.start()
    try:
        for i in range(count):
            time.sleep(GAP_SECONDS)
            q.send(body(i))
            stopwatch.wait_for(i + 1)
    finally:
        app.stop()
        cv.close()
    return stopwatch.latencies


def produce(url: str, count: int) -> None:
    """The producer process: ``count`` sends, spaced out, each stamped as it goes."""
    with conveyor.connect(url) as cv:
        q = cv.queue("latency")
        for i in range(count):
            time.sleep(GAP_SECONDS)
            q.send(body(i))


def across_processes(directory: Path, count: int) -> list[float]:
    url = f"sqlite://{directory / 'two'}"
    with conveyor.connect(url) as cv:
        cv.create_queue("latency")
    stopwatch = Stopwatch()
    app = worker(url, stopwatch)
    app.start()
    try:
        producer = subprocess.Popen([sys.executable, __file__, "--produce", url, str(count)])
        stopwatch.wait_for(count)
        if producer.wait() != 0:
            raise RuntimeError("the producer process failed")
    finally:
        app.stop()
    return stopwatch.latencies


def commit_floor(directory: Path, count: int) -> list[float]:
    conn = raw_connection(directory / "raw.db")
    rows = raw_rows(0, count)
    out = []
    for i in range(count):
        started = time.perf_counter()
        raw_insert_batch(conn, rows[i : i + 1])
        out.append(time.perf_counter() - started)
    conn.close()
    return out


def report(name: str, seconds: list[float], **params: object) -> None:
    ms = [s * 1000 for s in seconds]
    for q in (50, 99):
        emit(f"{name}_p{q}", percentile(ms, q), "ms", len(ms), **params)


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--produce":
        produce(sys.argv[2], int(sys.argv[3]))
        return
    args = arguments(__doc__ or "")
    quiet_logs()
    count = 40 if args.quick else 400
    with scratch_directory("latency") as directory:
        report("latency_in_process", in_process(directory, count, shared=True), target_p50_ms=5, target_p99_ms=25)
        report("latency_in_process_two_clients", in_process(directory, count, shared=False))
        report("latency_across_processes", across_processes(directory, count), target_p50_ms=20)
        report("raw_sqlite_commit_latency", commit_floor(directory, count))


if __name__ == "__main__":
    main()
