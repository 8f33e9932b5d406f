"""Conveyor against its peers on SQLite, end to end: N messages enqueued, then one worker acks them all.

The peers, Huey (``SqliteHuey``, fsync on) and persist-queue (``SQLiteAckQueue``), are installed at
pinned versions into an environment of their own (``benchmarks/.peers/``, git-ignored) and run there
as a subprocess (``peer_workloads.py``), so they never touch the project's locked environment. All
three store to SQLite in WAL mode with every acknowledged enqueue on disk: the peers with
synchronous=FULL, Conveyor by flushing the log itself after each durable commit (the same fdatasync).
The peers' processes get the malloc setting Conveyor gives its own (``harness.peer_process_environment``).

Conveyor runs the same work twice: enqueueing one ``send()`` per message (the peers' only way), and
with ``send_batch`` of 100 (its own way); either way one worker consumes in batches of 100
(``max_batch_timeout=0``) with a no-op handler. End-to-end time is enqueue time plus consume time.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import conveyor
from harness import (
    arguments,
    body,
    emit,
    peer_environment,
    peer_process_environment,
    ratio,
    scratch_directory,
    wait_until_handled,
)

HERE = Path(__file__).resolve().parent
PEERS = HERE / ".peers"
PINS = ("huey==3.5.4", "persist-queue==1.1.0")
BATCH = 100


def peer_python() -> Path:
    return peer_environment(PEERS, PINS)


def run_peer(system: str, directory: Path, count: int) -> dict[str, object]:
    done = subprocess.run(
        [str(peer_python()), str(HERE / "peer_workloads.py"), system, str(directory), str(count)],
        capture_output=True,
        text=True,
        timeout=600,
        env=peer_process_environment(),
    )
    if done.returncode != 0:
        raise RuntimeError(f"the {system} workload failed ({done.returncode}):\n{done.stderr}")
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

    @app.consumer("peers", max_batch_size=BATCH, max_batch_timeout=0)
    def handle(batch: conveyor.MessageBatch) -> None:
        return None

    app.start()
    wait_until_handled(app, "peers", count)
    finished = time.perf_counter()
    app.stop()
    cv.close()
    return {"enqueue_seconds": enqueued - started, "consume_seconds": finished - enqueued}


def report(system: str, enqueue: float, consume: float, count: int, settings: object) -> float:
    emit(f"{system}_enqueue_throughput", count / enqueue, "msg/s", count, settings=settings)
    emit(f"{system}_consume_throughput", count / consume, "msg/s", count, settings=settings)
    emit(f"{system}_end_to_end_throughput", count / (enqueue + consume), "msg/s", count, settings=settings)
    return count / (enqueue + consume)


def run_one(system: str, count: int) -> dict[str, object]:
    with scratch_directory(system) as directory:
        if system == "conveyor_send_batch":
            return run_conveyor(directory, count, batched=True)
        if system == "conveyor_send":
            return run_conveyor(directory, count, batched=False)
        return run_peer(system, directory, count)


SYSTEMS = ("huey", "persist-queue", "conveyor_send_batch", "conveyor_send")
CONVEYOR_SETTINGS = {"synchronous": "NORMAL + fdatasync of the log per durable commit", "journal_mode": "wal"}


def main() -> None:
    args = arguments(__doc__ or "")
    # The disk's fsync time swings with the other tenants' load, so the systems take turns over a
    # few rounds (in a rotating order) rather than each running once at a different moment.
    rounds = 1 if args.quick else 4
    per_round = 500 if args.quick else 2_500
    totals = {system: [0.0, 0.0] for system in SYSTEMS}
    settings: dict[str, object] = {}
    for r in range(rounds):
        for system in SYSTEMS[r % len(SYSTEMS) :] + SYSTEMS[: r % len(SYSTEMS)]:
            result = run_one(system, per_round)
            totals[system][0] += float(result["enqueue_seconds"])  # type: ignore[arg-type]
            totals[system][1] += float(result["consume_seconds"])  # type: ignore[arg-type]
            settings[system] = result.get("settings", CONVEYOR_SETTINGS)
    count = rounds * per_round
    rates = {
        system: report(system, totals[system][0], totals[system][1], count, settings[system]) for system in SYSTEMS
    }
    best = max(("huey", "persist-queue"), key=rates.__getitem__)
    params: dict[str, Any] = {"faster_peer": best, "pins": list(PINS), "rounds": rounds}
    ratio(
        "conveyor_send_batch_end_to_end_vs_faster_peer",
        rates["conveyor_send_batch"],
        rates[best],
        count,
        target=5,
        **params,
    )
    ratio("conveyor_send_end_to_end_vs_faster_peer", rates["conveyor_send"], rates[best], count, **params)


if __name__ == "__main__":
    main()
