"""Conveyor against its peers on SQLite, end to end: N messages enqueued, then one worker acks them all.

The peers, Huey (``SqliteHuey``, fsync on) and persist-queue (``SQLiteAckQueue``), are installed at
pinned versions into an environment of their own (``benchmarks/.peers/``, git-ignored) and run there
as a subprocess (``peer_workloads.py``), so they never touch the project's locked environment. All
three store to SQLite in WAL mode with synchronous=FULL: every acknowledged enqueue is on disk.

Conveyor runs the same work twice: enqueueing one ``send()`` per message (the peers' only way), and
with ``send_batch`` of 100 (its own way); either way one worker consumes in batches of 100
(``max_batch_timeout=0``) with a no-op handler. End-to-end time is enqueue time plus consume time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import conveyor
from harness import arguments, body, emit, ratio, scratch_directory

HERE = Path(__file__).resolve().parent
PEERS = HERE / ".peers"
PINS = ("huey==3.5.4", "persist-queue==1.1.0")
BATCH = 100


def peer_python() -> Path:
    """The peers' environment's Python, creating the environment first if it is missing or stale."""
    python = PEERS / "bin" / "python"
    marker = PEERS / "pins.txt"
    wanted = "\n".join(PINS)
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(PEERS)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *PINS], check=True)
    marker.write_text(wanted)
    return python


def run_peer(system: str, directory: Path, count: int) -> dict[str, object]:
    done = subprocess.run(
        [str(peer_python()), str(HERE / "peer_workloads.py"), system, str(directory), str(count)],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def run_conveyor(directory: Path, count: int, batched: bool) -> dict[str, object]:
    cv = conveyor.connect(f"sqlite://{directory}")
    q = cv.create_queue("peers")
    bodies = [body(i) for i in range(count)]
    started = time.perf_counter()
    if batched:
        for start in range(0, count, BATCH):
            q.send_batch([{"body": b} for b in bodies[start : start + BATCH]])
    else:
        for b in bodies:
            q.send(b)
    enqueued = time.perf_counter()
    app = conveyor.App(cv)
    done = threading.Event()

    @app.consumer("peers", max_batch_size=BATCH, max_batch_timeout=0)
    def handle(batch: conveyor.MessageBatch) -> None:
        return None

    app.start()
    dispatcher = app.dispatchers["peers"]
    while dispatcher.handled < count:
        done.wait(0.001)
    finished = time.perf_counter()
    app.stop()
    cv.close()
    return {"enqueue_seconds": enqueued - started, "consume_seconds": finished - enqueued}


def report(system: str, result: dict[str, object], count: int) -> float:
    enqueue, consume = float(result["enqueue_seconds"]), float(result["consume_seconds"])  # type: ignore[arg-type]
    settings = result.get("settings", {"synchronous": "FULL", "journal_mode": "wal"})
    emit(f"{system}_enqueue_throughput", count / enqueue, "msg/s", count, settings=settings)
    emit(f"{system}_consume_throughput", count / consume, "msg/s", count, settings=settings)
    emit(f"{system}_end_to_end_throughput", count / (enqueue + consume), "msg/s", count, settings=settings)
    return count / (enqueue + consume)


def main() -> None:
    args = arguments(__doc__ or "")
    count = 1_000 if args.quick else 10_000
    peers: dict[str, float] = {}
    for system in ("huey", "persist-queue"):
        with scratch_directory(system) as directory:
            peers[system] = report(system, run_peer(system, directory, count), count)
    with scratch_directory("conveyor-batch") as directory:
        batched = report("conveyor_send_batch", run_conveyor(directory, count, batched=True), count)
    with scratch_directory("conveyor-single") as directory:
        single = report("conveyor_send", run_conveyor(directory, count, batched=False), count)
    best = max(peers, key=peers.__getitem__)
    params: dict[str, Any] = {"faster_peer": best, "pins": list(PINS)}
    ratio("conveyor_send_batch_end_to_end_vs_faster_peer", batched, peers[best], count, target=5, **params)
    ratio("conveyor_send_end_to_end_vs_faster_peer", single, peers[best], count, **params)


if __name__ == "__main__":
    main()
