"""Producing: ``send_batch`` of 100 against raw ``executemany``, and 64 concurrent producer threads.

- ``send_batch``: Conveyor stores batches of 100 one-KB JSON messages; the raw limit is
  ``executemany`` of rows of the same size into a plain indexed table, WAL, synchronous=FULL, one
  commit per 100 rows. The two run in alternating rounds so that both see the same machine load. A
  third variant hands the engine the same batches already validated and encoded, to split the cost
  between the client (validation, JSON) and the engine.
- Concurrent sends: 64 threads each send one message at a time, every send durable. Conveyor's group
  commit shares an fsync between the sends that arrive together; the comparison is the same 64
  threads committing once per send on one raw connection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import conveyor
from conveyor.client.validation import prepare_batch
from harness import (
    arguments,
    body,
    emit,
    encoded_body,
    ratio,
    raw_connection,
    raw_insert_batch,
    raw_rows,
    scratch_directory,
)

BATCH = 100
THREADS = 64


def send_batch_vs_raw(directory: Path, rounds: int, batches_per_round: int) -> None:
    cv = conveyor.connect(f"sqlite://{directory / 'conveyor'}")
    q = cv.create_queue("send-batch")
    raw = raw_connection(directory / "raw.db")
    conveyor_seconds = engine_seconds = raw_seconds = 0.0
    sent = 0
    for _ in range(rounds):
        batches = [[{"body": body(sent + b * BATCH + i)} for i in range(BATCH)] for b in range(batches_per_round)]
        # The same batches validated and JSON-encoded beforehand: what the engine alone costs.
        encoded = [prepare_batch(batch, None) for batch in batches]
        rows = [raw_rows(sent + b * BATCH, BATCH) for b in range(batches_per_round)]
        started = time.perf_counter()
        for batch in batches:
            q.send_batch(batch)
        conveyor_seconds += time.perf_counter() - started
        started = time.perf_counter()
        for messages in encoded:
            cv.engine.enqueue(q.id, messages)
        engine_seconds += time.perf_counter() - started
        started = time.perf_counter()
        for chunk in rows:
            raw_insert_batch(raw, chunk)
        raw_seconds += time.perf_counter() - started
        sent += batches_per_round * BATCH
    cv.close()
    raw.close()
    params = {"batch": BATCH, "body_bytes": len(encoded_body(0)), "rounds": rounds}
    emit("send_batch_throughput", sent / conveyor_seconds, "msg/s", sent, **params)
    emit("engine_enqueue_preencoded_throughput", sent / engine_seconds, "msg/s", sent, **params)
    emit("raw_sqlite_executemany_throughput", sent / raw_seconds, "msg/s", sent, **params)
    ratio("send_batch_vs_raw_sqlite", raw_seconds, conveyor_seconds, sent, target=0.8, **params)
    ratio("engine_enqueue_preencoded_vs_raw_sqlite", raw_seconds, engine_seconds, sent, **params)


def run_threads(threads: int, per_thread: int, send: Callable[[int], Any]) -> float:
    """Seconds for ``threads`` threads to call ``send`` ``per_thread`` times each, started together."""
    barrier = threading.Barrier(threads + 1)

    def producer(t: int) -> None:
        barrier.wait()
        for i in range(per_thread):
            send(t * per_thread + i)

    workers = [threading.Thread(target=producer, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    barrier.wait()
    started = time.perf_counter()
    for worker in workers:
        worker.join()
    return time.perf_counter() - started


def concurrent_sends(directory: Path, per_thread: int) -> None:
    cv = conveyor.connect(f"sqlite://{directory / 'conveyor'}")
    q = cv.create_queue("concurrent")
    q.send(body(-1))  # open the shard and take the home slot outside the timing
    conveyor_seconds = run_threads(THREADS, per_thread, lambda i: q.send(body(i)))
    cv.close()

    raw = raw_connection(directory / "raw.db")
    lock = threading.Lock()
    rows = raw_rows(0, THREADS * per_thread)

    def commit_one(i: int) -> None:
        with lock:
            raw_insert_batch(raw, rows[i : i + 1])

    raw_seconds = run_threads(THREADS, per_thread, commit_one)
    raw.close()
    n = THREADS * per_thread
    params = {"threads": THREADS, "per_thread": per_thread}
    emit("concurrent_send_throughput", n / conveyor_seconds, "msg/s", n, target=10_000, **params)
    emit("raw_sqlite_commit_per_send_throughput", n / raw_seconds, "msg/s", n, **params)
    ratio("concurrent_send_vs_commit_per_send", raw_seconds, conveyor_seconds, n, **params)


def main() -> None:
    args = arguments(__doc__ or "")
    with scratch_directory("send") as directory:
        send_batch_vs_raw(directory, rounds=4 if args.quick else 10, batches_per_round=10 if args.quick else 30)
    with scratch_directory("concurrent") as directory:
        concurrent_sends(directory, per_thread=20 if args.quick else 150)


if __name__ == "__main__":
    main()
