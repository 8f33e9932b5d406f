"""Shards: two producer processes on a two-shard queue against one producer on a one-shard queue.

Each producer process takes its own home shard (the engine hands processes consecutive slots), so
on a two-shard queue two processes write two files, each with its own write lock and fsync. Every
producer sends one-KB messages as fast as its workload allows; all of them start together on a
signal, and throughput is all messages over the span from the first start to the last finish. Two
producers sharing one shard are measured too: the contention that sharding removes. Three workloads:
one thread a producer sending one message at a time (fsync-bound), 16 threads a producer sending one
at a time (group commit, CPU-bound), and ``send_batch`` of 100 (CPU- and disk-bound).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import conveyor
from harness import arguments, body, emit, ratio, scratch_directory

BATCH = 100
# Producer threads per process in the single-message workload.
THREADS = 16


def send_batches(q: conveyor.Queue, count: int) -> Callable[[], None]:
    batches = [[{"body": body(s + i)} for i in range(BATCH)] for s in range(0, count, BATCH)]

    def run() -> None:
        for batch in batches:
            q.send_batch(batch)

    return run


def send_singly(q: conveyor.Queue, count: int, threads: int = THREADS) -> Callable[[], None]:
    per_thread = count // threads
    bodies = [[body(t * per_thread + i) for i in range(per_thread)] for t in range(threads)]

    def run() -> None:
        workers = [threading.Thread(target=lambda b=b: [q.send(m) for m in b]) for b in bodies]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()

    return run


def send_serially(q: conveyor.Queue, count: int) -> Callable[[], None]:
    return send_singly(q, count, threads=1)


WORKLOADS = {"batch": send_batches, "single": send_singly, "serial": send_serially}


def produce(url: str, queue: str, workload: str, count: int) -> None:
    """A producer process: warm up, say ready, wait for "go", send, print its start and end times."""
    with conveyor.connect(url) as cv:
        q = cv.queue(queue)
        q.send(body(-1))  # take the home slot and open the shard outside the timing
        run = WORKLOADS[workload](q, count)
        print("ready", flush=True)
        sys.stdin.readline()
        started, cpu = time.time(), time.process_time()
        run()
        ended, cpu = time.time(), time.process_time() - cpu
        print(json.dumps({"start": started, "end": ended, "cpu": cpu}), flush=True)


def shard_rows(directory: Path) -> list[int]:
    """Messages stored in each shard file (read directly: which shard each producer wrote to)."""
    counts = []
    for path in sorted((directory / "shards").glob("*.db")):
        with sqlite3.connect(path) as conn:
            counts.append(conn.execute("SELECT count(*) FROM messages").fetchone()[0])
    return counts


def throughput(workload: str, shards: int, producers: int, per_producer: int) -> tuple[float, dict[str, Any]]:
    """Seconds from the first producer's start to the last one's end, and what each producer saw."""
    with scratch_directory(f"shards-{workload}") as directory:
        return measure(directory, workload, shards, producers, per_producer)


def measure(
    directory: Path, workload: str, shards: int, producers: int, per_producer: int
) -> tuple[float, dict[str, Any]]:
    url = f"sqlite://{directory}"
    with conveyor.connect(url) as cv:
        cv.create_queue("shards", shards=shards)
    command = [sys.executable, __file__, "--produce", url, "shards", workload, str(per_producer)]
    children = [
        subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(producers)
    ]
    for child in children:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError("a producer process failed to start")
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    spans = []
    for child in children:
        out, _ = child.communicate()
        if child.returncode != 0:
            raise RuntimeError("a producer process failed")
        spans.append(json.loads(out))
    seconds = max(s["end"] for s in spans) - min(s["start"] for s in spans)
    # CPU seconds per wall second of each producer: near 1.0 means it was CPU-bound (one core each).
    cpu_share = [round(s["cpu"] / (s["end"] - s["start"]), 2) for s in spans]
    return seconds, {"shard_rows": shard_rows(directory), "producer_cpu_share": cpu_share}


# (name, shards, producer processes)
SETUPS = (
    ("one_producer_one_shard", 1, 1),
    ("two_producers_two_shards", 2, 2),
    ("two_producers_one_shard", 1, 2),
)


def compare(workload: str, per_producer: int, rounds: int, **params: Any) -> None:
    """Every setup once per round, in a rotating order, so that all of them meet the same disk and load."""
    seconds = {name: 0.0 for name, _, _ in SETUPS}
    seen: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in SETUPS}
    for r in range(rounds):
        for name, shards, producers in SETUPS[r % len(SETUPS) :] + SETUPS[: r % len(SETUPS)]:
            spent, info = throughput(workload, shards, producers, per_producer)
            seconds[name] += spent
            seen[name].append(info)
    rates = {}
    for name, _, producers in SETUPS:
        n = rounds * producers * per_producer
        rates[name] = n / seconds[name]
        cpu = [info["producer_cpu_share"] for info in seen[name]]
        rows = seen[name][-1]["shard_rows"]
        emit(
            f"{workload}_{name}_throughput", rates[name], "msg/s", n, producer_cpu_share=cpu, shard_rows=rows, **params
        )
    n = rounds * 2 * per_producer
    params["rounds"] = rounds
    ratio(
        f"{workload}_two_shards_vs_one_shard",
        rates["two_producers_two_shards"],
        rates["one_producer_one_shard"],
        n,
        target=1.5,
        **params,
    )
    ratio(
        f"{workload}_two_shards_vs_two_producers_on_one_shard",
        rates["two_producers_two_shards"],
        rates["two_producers_one_shard"],
        n,
        **params,
    )


def main() -> None:
    if len(sys.argv) == 6 and sys.argv[1] == "--produce":
        produce(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return
    args = arguments(__doc__ or "")
    rounds = 1 if args.quick else 3
    # One thread a producer, one send at a time: bound by each commit's fsync, not by the CPU, so a
    # second shard's separate write path shows even on a busy machine (more rounds: it is noisier).
    compare("serial", 300 if args.quick else 1_500, 1 if args.quick else 6, threads_per_producer=1)
    compare("single", 1_600 if args.quick else 8_000, rounds, threads_per_producer=THREADS)
    compare("batch", 5_000 if args.quick else 20_000, rounds, batch=BATCH)


if __name__ == "__main__":
    main()
