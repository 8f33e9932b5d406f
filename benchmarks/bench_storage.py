"""Buckets against obstore doing the same durable work, in alternating rounds of one run.

- Local put of 4 KB and 1 MB objects ÷ obstore's put + SHA-256 + fsync of the file and its
  directory on the same kind of directory (target ≥ 0.8 ×). A 4 KB object is kept in its metadata
  row (one fsynced SQLite commit, no file); a 1 MB object is a file, and Conveyor adds the row's
  commit to obstore's work.
- Local get ÷ obstore's get of the same objects (target ≥ 0.9 ×): a 4 KB object is one read of its
  row; a 1 MB object adds the row's read to obstore's get of the file.
- Notification latency, put → queue handler start ÷ the queue's own send → handler latency
  (target ≤ 2 ×), medians over the round.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import threading
import time
from pathlib import Path

import obstore
from obstore.store import LocalStore

import conveyor
from harness import arguments, emit, quiet_logs, ratio, scratch_directory


def _fsync(path: Path) -> None:
    for target, flags in ((path, os.O_RDONLY), (path.parent, os.O_RDONLY | os.O_DIRECTORY)):
        fd = os.open(target, flags)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def raw_puts(directory: Path, data: bytes, count: int, round_no: int) -> float:
    store = LocalStore(str(directory), mkdir=True)
    started = time.perf_counter()
    for i in range(count):
        key = f"r{round_no}/k{i}"
        obstore.put(store, key, data, use_multipart=False)
        hashlib.sha256(data).hexdigest()
        _fsync(directory / key)
    return count / (time.perf_counter() - started)


def conveyor_puts(bucket: conveyor.Bucket, data: bytes, count: int, round_no: int) -> float:
    started = time.perf_counter()
    for i in range(count):
        bucket.put(f"r{round_no}/k{i}", data)
    return count / (time.perf_counter() - started)


def raw_gets(directory: Path, count: int, round_no: int) -> float:
    store = LocalStore(str(directory))
    started = time.perf_counter()
    for i in range(count):
        bytes(obstore.get(store, f"r{round_no}/k{i}").bytes())
    return count / (time.perf_counter() - started)


def conveyor_gets(bucket: conveyor.Bucket, count: int, round_no: int) -> float:
    started = time.perf_counter()
    for i in range(count):
        bucket.get(f"r{round_no}/k{i}").bytes()
    return count / (time.perf_counter() - started)


def puts_and_gets(directory: Path, size: int, rounds: int, count: int) -> None:
    data = os.urandom(size)
    figures: dict[str, list[float]] = {"raw put": [], "put": [], "raw get": [], "get": []}
    with conveyor.connect(f"sqlite://{directory / 'deployment'}") as cv:
        bucket = cv.create_bucket("bench")
        raw = directory / "raw"
        for r in range(rounds):
            order = ("raw", "ours") if r % 2 == 0 else ("ours", "raw")
            for who in order:
                if who == "raw":
                    figures["raw put"].append(raw_puts(raw, data, count, r))
                else:
                    figures["put"].append(conveyor_puts(bucket, data, count, r))
            for who in order:
                if who == "raw":
                    figures["raw get"].append(raw_gets(raw, count, r))
                else:
                    figures["get"].append(conveyor_gets(bucket, count, r))
    n = rounds * count
    median = {name: statistics.median(values) for name, values in figures.items()}
    for name, value in median.items():
        emit(f"local {name}", value, "objects/s", n, size=size)
    ratio("local put ÷ obstore put + SHA-256 + fsync", median["put"], median["raw put"], n, target=0.8, size=size)
    ratio("local get ÷ obstore get", median["get"], median["raw get"], n, target=0.9, size=size)


def notification_latency(directory: Path, count: int) -> None:
    with conveyor.connect(f"sqlite://{directory / 'latency'}") as cv:
        cv.create_queue("direct")
        cv.create_queue("events")
        bucket = cv.create_bucket("bench")
        bucket.add_notification("events", actions=["PutObject"])
        started: dict[str, float] = {}
        latencies: dict[str, list[float]] = {"direct": [], "events": []}
        done = threading.Semaphore(0)
        app = conveyor.App(cv)

        def handler(queue: str) -> object:
            def handle(batch: conveyor.MessageBatch) -> None:
                now = time.perf_counter()
                for m in batch.messages:
                    key = m.body["key"] if queue == "direct" else m.body["object"]["key"]
                    latencies[queue].append(now - started[key])
                    m.ack()
                    done.release()

            return handle

        app.consumer("direct", max_batch_size=1, max_batch_timeout=0)(handler("direct"))
        app.consumer("events", max_batch_size=1, max_batch_timeout=0)(handler("events"))
        app.start()
        try:
            for i in range(count):
                key = f"d{i}"
                started[key] = time.perf_counter()
                cv.queue("direct").send({"key": key})
                done.acquire(timeout=30)
                key = f"e{i}"
                started[key] = time.perf_counter()
                bucket.put(key, b"x")
                done.acquire(timeout=30)
        finally:
            app.stop()
    direct, events = (statistics.median(latencies[q]) * 1000 for q in ("direct", "events"))
    emit("send → handler start, median", direct, "ms", count)
    emit("put → notification handler start, median", events, "ms", count)
    value = events / direct
    emit("notification latency ÷ send latency (lower is better)", value, "ratio", count, target=2.0, met=value <= 2.0)


def main() -> None:
    quick = arguments(__doc__ or "").quick
    quiet_logs()
    rounds = 3 if quick else 6
    with scratch_directory("storage") as directory:
        puts_and_gets(directory / "small", 4096, rounds, 50 if quick else 200)
        puts_and_gets(directory / "large", 1 << 20, rounds, 10 if quick else 40)
        notification_latency(directory, 20 if quick else 100)


if __name__ == "__main__":
    main()
