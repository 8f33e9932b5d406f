"""A producer killed with SIGKILL at random moments: every batch whose send returned is stored
whole, and no batch is ever stored in part.

``crash_producer.py`` prints each batch's number right after ``send_batch`` returns; the test kills
it at a random moment once it has produced for a while, restarts it with fresh batch numbers, and
after the last kill reads every stored message back through the engine.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import conveyor
from conveyor.codec import decode

PRODUCER = Path(__file__).with_name("crash_producer.py")
BATCH_SIZE = 100
THREADS = 4
KILLS = 12
# Each run starts its batch numbers here times its index, so no two runs share a number.
RUN_STRIDE = 1_000_000
# A run is killed this long (at random) after its first send returned.
LIFETIME_SECONDS = (0.0, 0.4)


def run_until_killed(data_dir: Path, first_batch: int, rng: random.Random, log: Path) -> list[int]:
    """Start a producer, SIGKILL it at a random moment, return the batch numbers it printed."""
    with log.open("wb") as errors:
        process = subprocess.Popen(
            [sys.executable, str(PRODUCER), str(data_dir), "orders", str(first_batch), str(THREADS)],
            stdout=subprocess.PIPE,
            stderr=errors,
        )
    assert process.stdout is not None
    lines: list[bytes] = []
    first_line = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            first_line.set()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        assert first_line.wait(timeout=30), f"the producer sent nothing; see {log}"
        time.sleep(rng.uniform(*LIFETIME_SECONDS))
        # A producer that died by itself must not pass for one the test killed.
        assert process.poll() is None, f"the producer exited by itself ({process.returncode}); see {log}"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        reader.join()
    # A line cut short by the kill names no batch the test can rely on.
    return [int(line) for line in lines if line.endswith(b"\n")]


def stored_batches(cv: conveyor.Conveyor) -> dict[int, Counter[int]]:
    """Batch number -> how many times each message index of it is stored."""
    batches: dict[int, Counter[int]] = defaultdict(Counter)
    for m in cv.engine.peek(cv.queue("orders").id, 10_000_000):
        body = decode(m.body, m.content_type)
        batches[body["b"]][body["i"]] += 1
    return batches


def test_sigkilled_producer_stores_every_returned_batch_whole_and_no_batch_in_part(
    tmp_path: Path, rng: random.Random
) -> None:
    data_dir = tmp_path / "data"
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        cv.create_queue("orders")
    returned: dict[int, list[int]] = {}
    for run in range(1, KILLS + 1):
        returned[run] = run_until_killed(data_dir, run * RUN_STRIDE, rng, tmp_path / f"producer-{run}.log")

    for path in [data_dir / "catalog.db", *(data_dir / "shards").glob("*.db")]:
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)], path
        conn.close()
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        batches = stored_batches(cv)
        stored = sum(sum(indexes.values()) for indexes in batches.values())
        assert cv.queue("orders").metrics().backlog_count == stored
        assert cv.queue("orders").counters().sent == stored

    unconfirmed_total = 0
    whole = Counter({i: 1 for i in range(BATCH_SIZE)})
    partial = {b: indexes for b, indexes in batches.items() if indexes != whole}
    assert partial == {}, "batches stored in part (or twice)"
    for run, printed in returned.items():
        assert printed, f"run {run} returned no batch before it was killed"
        assert sorted(set(printed) - set(batches)) == [], f"run {run}: batches lost after send returned"
        # At most the sends in flight at the kill (one per thread) were stored without returning.
        unconfirmed = {b for b in batches if b // RUN_STRIDE == run} - set(printed)
        assert len(unconfirmed) <= THREADS, f"run {run}: batches stored that were never sent"
        unconfirmed_total += len(unconfirmed)
    print(
        f"{KILLS} producers killed; {len(batches)} batches stored whole, {stored} messages; "
        f"{unconfirmed_total} batches committed by a send the kill stopped from returning"
    )
