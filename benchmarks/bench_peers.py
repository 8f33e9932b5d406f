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

Two headline comparisons, kept apart so that neither is read for the other: *one message per call*
(``send()`` against the peers' enqueue and against the raw single-commit limit, one autocommitted
``INSERT`` of the same row at synchronous=FULL, which takes its turn in the same rounds; latency
p50/p99 of each call) and *batches* (``send_batch`` end to end against the faster peer). Flushes per
enqueue are counted with strace for every system (``flush_counts.py``).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import conveyor
from flush_counts import flushes_per_enqueue
from harness import (
    arguments,
    body,
    emit,
    peer_environment,
    peer_process_environment,
    percentile,
    ratio,
    raw_connection,
    raw_rows,
    raw_single_commit,
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


def timed_calls(call: Callable[[Any], object], arguments: list[Any]) -> tuple[float, list[float]]:
    """Seconds for all the calls, and each call's seconds."""
    latencies = []
    started = time.perf_counter()
    for argument in arguments:
        before = time.perf_counter()
        call(argument)
        latencies.append(time.perf_counter() - before)
    return time.perf_counter() - started, latencies


def run_raw(directory: Path, count: int) -> dict[str, object]:
    conn = raw_connection(directory / "raw.db")
    seconds, latencies = timed_calls(lambda row: raw_single_commit(conn, row), raw_rows(0, count))
    conn.close()
    return {"enqueue_seconds": seconds, "consume_seconds": 0.0, "latencies": latencies}


def run_conveyor(directory: Path, count: int, batched: bool) -> dict[str, object]:
    cv = conveyor.connect(f"sqlite://{directory}")
    q = cv.create_queue("peers")
    bodies = [body(i) for i in range(count)]
    latencies: list[float] = []
    started = time.perf_counter()
    if batched:
        for start in range(0, count, BATCH):
            q.send_batch([{"body": b} for b in bodies[start : start + BATCH]])
    else:
        _, latencies = timed_calls(q.send, bodies)
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
    return {"enqueue_seconds": enqueued - started, "consume_seconds": finished - enqueued, "latencies": latencies}


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
        if system == "raw_single_commit":
            return run_raw(directory, count)
        return run_peer(system, directory, count)


SYSTEMS = ("huey", "persist-queue", "conveyor_send_batch", "conveyor_send", "raw_single_commit")
PEERS_ONLY = ("huey", "persist-queue")
CONVEYOR_SETTINGS = {"synchronous": "NORMAL + fdatasync of the log per durable commit", "journal_mode": "wal"}
RAW_SETTINGS = {"synchronous": "FULL", "journal_mode": "wal", "statement": "one autocommitted INSERT"}


def report_flushes(count: int) -> None:
    """Flushes per enqueue of every system (strace; ``flush_counts.py``)."""
    for system in SYSTEMS:
        python = peer_python() if system in PEERS_ONLY else None
        env = peer_process_environment() if system in PEERS_ONLY else None
        per_enqueue = flushes_per_enqueue(system, count, python, env)
        if per_enqueue is None:
            emit(f"{system}_flushes_per_enqueue", float("nan"), "calls", count, note="strace is not installed")
        else:
            emit(f"{system}_flushes_per_enqueue", per_enqueue, "calls", count, counted="strace -c -f: fsync+fdatasync")


def main() -> None:
    args = arguments(__doc__ or "")
    # The disk's fsync time swings with the other tenants' load, so the systems take turns over a
    # few rounds (in a rotating order) rather than each running once at a different moment.
    rounds = 1 if args.quick else 4
    per_round = 500 if args.quick else 2_500
    totals = {system: [0.0, 0.0] for system in SYSTEMS}
    latencies: dict[str, list[float]] = {system: [] for system in SYSTEMS}
    settings: dict[str, object] = {"raw_single_commit": RAW_SETTINGS}
    for r in range(rounds):
        for system in SYSTEMS[r % len(SYSTEMS) :] + SYSTEMS[: r % len(SYSTEMS)]:
            result = run_one(system, per_round)
            totals[system][0] += float(result["enqueue_seconds"])  # type: ignore[arg-type]
            totals[system][1] += float(result["consume_seconds"])  # type: ignore[arg-type]
            latencies[system].extend(result.get("latencies", []))  # type: ignore[arg-type]
            settings.setdefault(system, result.get("settings", CONVEYOR_SETTINGS))
    count = rounds * per_round
    rates = {
        system: report(system, totals[system][0], totals[system][1], count, settings[system])
        for system in SYSTEMS
        if system != "raw_single_commit"
    }
    enqueue = {system: count / totals[system][0] for system in SYSTEMS}
    emit("raw_single_commit_enqueue_throughput", enqueue["raw_single_commit"], "msg/s", count, settings=RAW_SETTINGS)
    for system in ("conveyor_send", "raw_single_commit"):
        for q in (50, 99):
            emit(f"{system}_latency_p{q}", percentile(latencies[system], q) * 1e3, "ms", count)
    best = max(PEERS_ONLY, key=rates.__getitem__)
    best_enqueue = max(PEERS_ONLY, key=enqueue.__getitem__)
    params: dict[str, Any] = {"faster_peer": best, "pins": list(PINS), "rounds": rounds}
    # Headline 1: one message per call, each call durable.
    one: dict[str, Any] = {"comparison": "one message per call"}
    ratio(
        "one_message_send_vs_raw_single_commit",
        enqueue["conveyor_send"],
        enqueue["raw_single_commit"],
        count,
        target=0.75,
        rounds=rounds,
        **one,
    )
    ratio(
        "one_message_send_vs_faster_peer_enqueue",
        enqueue["conveyor_send"],
        enqueue[best_enqueue],
        count,
        target=1.0,
        faster_peer=best_enqueue,
        **one,
    )
    p50 = percentile(latencies["conveyor_send"], 50) / percentile(latencies["raw_single_commit"], 50)
    emit("one_message_send_p50_vs_raw_commit_p50", p50, "ratio", count, target_at_most=1.3, met=p50 <= 1.3, **one)
    ratio("one_message_send_end_to_end_vs_faster_peer", rates["conveyor_send"], rates[best], count, **params, **one)
    # Headline 2: Conveyor's batches against the peers' single enqueues (they have no batch enqueue).
    batches: dict[str, Any] = {"comparison": "send_batch of 100 against the peers' one message per call"}
    ratio(
        "batch_send_batch_end_to_end_vs_faster_peer",
        rates["conveyor_send_batch"],
        rates[best],
        count,
        target=5,
        **params,
        **batches,
    )
    report_flushes(100 if args.quick else 500)


if __name__ == "__main__":
    main()
