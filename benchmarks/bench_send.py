"""Producing: ``send_batch`` of 100 against raw ``executemany``, and 64 concurrent producer threads.

- ``send_batch``: Conveyor stores batches of 100 one-KB JSON messages; the raw limit is
  ``executemany`` of rows of the same size into a plain indexed table, WAL, synchronous=FULL, one
  commit per 100 rows. The two run in alternating rounds so that both see the same machine load. A
  third variant hands the engine the same batches already validated and encoded, to split the cost
  between the client (validation, JSON) and the engine.
- Concurrent sends: 64 threads each send one message at a time, every send durable. Conveyor's group
  commit shares an fsync between the sends that arrive together; the comparisons are the same 64
  threads committing once per send on one raw connection, and one thread's ``send()`` rate in the
  same run (five alternating runs of each, medians; target 64 threads >= 2.5 x one thread). Each
  run also reports its commits per second and sends per commit (the shard's group-commit counters):
  the rate is their product, which says whether a slow run waited on the disk or formed small groups.
"""

from __future__ import annotations

import statistics
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


def sends_of(cv: conveyor.Conveyor, q: conveyor.Queue, threads: int, per_thread: int) -> tuple[float, int, int]:
    """Seconds for ``threads`` threads to send ``per_thread`` messages each, and the commits and
    operations the queue's shard counted meanwhile."""
    committer = cv.engine.inner.router.all(q.id)[0].committer  # type: ignore[attr-defined]
    commits, operations = committer.commits, committer.operations
    # The bodies are made before the clock starts, for one thread as for many (made inside it, they
    # cost the 64 threads ~8 us of interpreter time a send that the one thread did not pay).
    bodies = [body(i) for i in range(threads * per_thread)]
    if threads == 1:
        started = time.perf_counter()
        for b in bodies:
            q.send(b)
        seconds = time.perf_counter() - started
    else:
        seconds = run_threads(threads, per_thread, lambda i: q.send(bodies[i]))
    return seconds, committer.commits - commits, committer.operations - operations


def concurrent_sends(directory: Path, per_thread: int, one_thread: int, runs: int) -> None:
    cv = conveyor.connect(f"sqlite://{directory / 'conveyor'}")
    q = cv.create_queue("concurrent")
    q.send(body(-1))  # open the shard and take the home slot outside the timing
    n = THREADS * per_thread
    many_rates: list[float] = []
    one_rates: list[float] = []
    for run in range(runs):
        for threads, count in ((1, one_thread), (THREADS, per_thread)):
            seconds, commits, operations = sends_of(cv, q, threads, count)
            rate = threads * count / seconds
            (one_rates if threads == 1 else many_rates).append(rate)
            emit(
                f"send_{threads}_threads_run_throughput",
                rate,
                "msg/s",
                threads * count,
                run=run,
                commits_per_second=round(commits / seconds),
                sends_per_commit=round(operations / commits, 2) if commits else None,
            )
    cv.close()

    raw = raw_connection(directory / "raw.db")
    lock = threading.Lock()
    rows = raw_rows(0, n)

    def commit_one(i: int) -> None:
        with lock:
            raw_insert_batch(raw, rows[i : i + 1])

    raw_seconds = run_threads(THREADS, per_thread, commit_one)
    raw.close()
    many, one = statistics.median(many_rates), statistics.median(one_rates)
    params: dict[str, Any] = {"threads": THREADS, "per_thread": per_thread, "runs": runs, "of": "medians"}
    emit("concurrent_send_throughput", many, "msg/s", n, target=10_000, **params)
    emit("one_thread_send_throughput", one, "msg/s", one_thread, runs=runs, of="median")
    emit("raw_sqlite_commit_per_send_throughput", n / raw_seconds, "msg/s", n, **params)
    ratio("concurrent_send_vs_commit_per_send", many, n / raw_seconds, n, **params)
    ratio("concurrent_send_vs_one_thread_send", many, one, n, target=2.5, **params)


def main() -> None:
    args = arguments(__doc__ or "")
    with scratch_directory("send") as directory:
        send_batch_vs_raw(directory, rounds=4 if args.quick else 10, batches_per_round=10 if args.quick else 30)
    with scratch_directory("concurrent") as directory:
        quick = args.quick
        concurrent_sends(
            directory, per_thread=20 if quick else 150, one_thread=300 if quick else 2000, runs=2 if quick else 5
        )


if __name__ == "__main__":
    main()
