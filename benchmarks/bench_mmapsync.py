"""mmapsync: feature-vector lookups from Python, against py-lmdb, Redis and a Manager dict, in one run.

Every store holds the same table: ``--keys`` random u64 keys, each with a ``--dim``-float32 vector.
One lookup is "acquire, look up one vector, release" and ends with a NumPy array of the vector:

- mmapsync: ``with store.read() as table: table.get(key)`` (a view into the mapped file);
- lmdb: ``with env.begin(buffers=True) as txn: np.frombuffer(txn.get(key))`` (zero-copy too);
- Redis: ``np.frombuffer(client.get(key))`` over a Unix socket, on a redis-server this script starts;
- Manager: ``np.frombuffer(shared[key])`` on a ``multiprocessing.Manager().dict()``.

Single lookups are timed one by one with ``perf_counter_ns`` (its own cost, printed as
``timer_overhead``, is included, not subtracted); batches are timed whole and divided by their size.
The "under a writer" figures time single mmapsync lookups while another process publishes a new
table back to back. Each line printed is one JSON object: name, value, unit, n, params.

Run: ``uv sync --frozen --group bench`` once, then ``.venv/bin/python benchmarks/bench_mmapsync.py``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lmdb
import numpy as np
import redis

from conveyor.mmapsync.feature_store import FeatureStore

TMPFS = Path("/dev/shm")
BATCH = 1000


def emit(name: str, value: float, unit: str, n: int, **params: Any) -> None:
    print(json.dumps({"name": name, "value": round(value, 3), "unit": unit, "n": n, "params": params}))


def percentile(samples: list[int], q: float) -> float:
    return float(np.percentile(np.asarray(samples, dtype=np.int64), q * 100, method="lower"))


def time_each(lookup: Callable[[int], object], picks: list[int]) -> list[int]:
    """Nanoseconds of each ``lookup(key)``."""
    clock = time.perf_counter_ns
    samples = []
    for key in picks:
        started = clock()
        lookup(key)
        samples.append(clock() - started)
    return samples


def time_batches(lookup: Callable[[np.ndarray], object], batches: list[np.ndarray]) -> float:
    """Median nanoseconds per key over whole-batch timings."""
    per_key = []
    for batch in batches:
        started = time.perf_counter_ns()
        lookup(batch)
        per_key.append((time.perf_counter_ns() - started) / len(batch))
    return statistics.median(per_key)


def report_singles(name: str, samples: list[int], **params: Any) -> float:
    p50 = percentile(samples, 0.50)
    emit(f"{name}.p50", p50, "ns", len(samples), **params)
    emit(f"{name}.p99", percentile(samples, 0.99), "ns", len(samples), **params)
    return p50


def make_table(keys: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = np.unique(rng.integers(0, np.iinfo(np.uint64).max, keys, dtype=np.uint64, endpoint=True))
    return ids, rng.random((len(ids), dim), dtype=np.float32)


def publish_back_to_back(prefix: str, keys: int, dim: int, stop: Any, count: Any) -> None:
    """Writer process: publish a fresh table (same keys, new vectors) until told to stop."""
    store = FeatureStore(prefix)
    ids, vectors = make_table(keys, dim, seed=1)
    while not stop.is_set():
        vectors[0, 0] += 1
        store.publish(ids, vectors, grace=1.0)
        count.value += 1


@contextmanager
def redis_on_unix_socket(directory: Path) -> Iterator[redis.Redis]:
    """A private redis-server listening only on a Unix socket, stopped on exit."""
    socket = directory / "redis.sock"
    command = ["redis-server", "--port", "0", "--unixsocket", str(socket), "--unixsocketperm", "700"]
    command += ["--save", "", "--appendonly", "no", "--dir", str(directory)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    try:
        client = redis.Redis(unix_socket_path=str(socket))
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except (redis.ConnectionError, FileNotFoundError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield client
        client.close()
    finally:
        server.terminate()
        server.wait(10)


def bench_mmapsync(
    directory: Path, ids: np.ndarray, vectors: np.ndarray, picks: list[int], batches: list[np.ndarray]
) -> dict[str, float]:
    params = {"keys": len(ids), "dim": vectors.shape[1], "fs": "tmpfs"}
    prefix = str(directory / "features")
    FeatureStore(prefix).publish(ids, vectors)
    store = FeatureStore(prefix)
    read = store.read

    def one(key: int) -> object:
        with read() as table:
            return table.get(key)

    def nothing(key: int) -> object:
        with read():
            return None

    time_each(one, picks[:10_000])  # warm the page tables
    results = {"acquire_release": report_singles("mmapsync.acquire_release", time_each(nothing, picks), **params)}
    results["single"] = report_singles("mmapsync.single", time_each(one, picks), **params)
    with read() as table:
        results["rows"] = time_batches(table.rows, batches)
        results["get_many"] = time_batches(table.get_many, batches)
        results["take"] = time_batches(table.take, batches)
    for kind in ("rows", "get_many", "take"):
        emit(f"mmapsync.batch.{kind}", results[kind], "ns/key", len(batches), batch=BATCH, **params)
    return results


def bench_under_writer(directory: Path, keys: int, dim: int, seconds: float) -> None:
    prefix = str(directory / "busy")
    ids, vectors = make_table(keys, dim, seed=1)
    FeatureStore(prefix).publish(ids, vectors)
    context = multiprocessing.get_context("spawn")
    stop, count = context.Event(), context.Value("q", 0)
    writer = context.Process(target=publish_back_to_back, args=(prefix, keys, dim, stop, count))
    writer.start()
    store = FeatureStore(prefix)
    read = store.read
    rng = np.random.default_rng(7)
    picks = [int(k) for k in ids[rng.integers(0, len(ids), 100_000)]]

    def one(key: int) -> object:
        with read() as table:
            return table.get(key)

    while count.value < 2:
        time.sleep(0.01)
    samples: list[int] = []
    started, published_before = time.monotonic(), count.value
    while time.monotonic() - started < seconds:
        samples += time_each(one, picks)
    elapsed, published = time.monotonic() - started, count.value - published_before
    stop.set()
    writer.join(30)
    params = {"keys": keys, "dim": dim, "publishes": published, "publishes_per_s": round(published / elapsed, 1)}
    report_singles("mmapsync.under_writer", samples, **params)
    emit("mmapsync.under_writer.p999", percentile(samples, 0.999), "ns", len(samples), **params)


def bench_lmdb(
    directory: Path, ids: np.ndarray, vectors: np.ndarray, picks: list[int], batches: list[np.ndarray]
) -> dict[str, float]:
    params = {"keys": len(ids), "dim": vectors.shape[1], "fs": "tmpfs"}
    env = lmdb.open(str(directory / "lmdb"), map_size=2 * vectors.nbytes + (64 << 20), lock=True)
    with env.begin(write=True) as txn:
        for key, vector in zip(ids.tolist(), vectors, strict=True):
            txn.put(key.to_bytes(8, "little"), vector.tobytes())

    def one(key: int) -> object:
        with env.begin(buffers=True) as txn:
            return np.frombuffer(txn.get(key.to_bytes(8, "little")), dtype=np.float32)

    def many(batch: np.ndarray) -> object:
        with env.begin(buffers=True) as txn:
            return [np.frombuffer(txn.get(key.to_bytes(8, "little")), dtype=np.float32) for key in batch.tolist()]

    time_each(one, picks[:10_000])
    results = {"single": report_singles("lmdb.single", time_each(one, picks), **params)}
    results["batch"] = time_batches(many, batches)
    emit("lmdb.batch", results["batch"], "ns/key", len(batches), batch=BATCH, **params)
    env.close()
    return results


def bench_redis(
    directory: Path, ids: np.ndarray, vectors: np.ndarray, picks: list[int], batches: list[np.ndarray]
) -> dict[str, float]:
    params = {"keys": len(ids), "dim": vectors.shape[1], "transport": "unix socket"}
    with redis_on_unix_socket(directory) as client:
        pipe = client.pipeline(transaction=False)
        for i, key in enumerate(ids.tolist()):
            pipe.set(key.to_bytes(8, "little"), vectors[i].tobytes())
            if i % 1000 == 999:
                pipe.execute()
        pipe.execute()

        def one(key: int) -> object:
            return np.frombuffer(client.get(key.to_bytes(8, "little")), dtype=np.float32)

        def many(batch: np.ndarray) -> object:
            found = client.mget([key.to_bytes(8, "little") for key in batch.tolist()])
            return [np.frombuffer(value, dtype=np.float32) for value in found]

        time_each(one, picks[:1000])
        results = {"single": report_singles("redis.single", time_each(one, picks), **params)}
        results["batch"] = time_batches(many, batches)
        emit("redis.batch_mget", results["batch"], "ns/key", len(batches), batch=BATCH, **params)
    return results


def bench_manager(ids: np.ndarray, vectors: np.ndarray, picks: list[int]) -> dict[str, float]:
    params = {"keys": len(ids), "dim": vectors.shape[1]}
    with multiprocessing.Manager() as manager:
        shared = manager.dict()
        chunk = 10_000
        for start in range(0, len(ids), chunk):
            shared.update(
                {int(k): vectors[start + i].tobytes() for i, k in enumerate(ids[start : start + chunk].tolist())}
            )

        def one(key: int) -> object:
            return np.frombuffer(shared[key], dtype=np.float32)

        time_each(one, picks[:500])
        return {"single": report_singles("manager_dict.single", time_each(one, picks), **params)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=200_000, help="keys in the table")
    parser.add_argument("--dim", type=int, default=256, help="float32 features per key")
    parser.add_argument("--lookups", type=int, default=200_000, help="single lookups timed per fast store")
    parser.add_argument("--slow-lookups", type=int, default=20_000, help="single lookups for Redis and Manager")
    parser.add_argument("--writer-keys", type=int, default=20_000, help="keys in the table republished non-stop")
    parser.add_argument("--writer-seconds", type=float, default=3.0, help="reading time under the writer")
    args = parser.parse_args()

    ids, vectors = make_table(args.keys, args.dim, seed=0)
    rng = np.random.default_rng(3)
    picks = [int(k) for k in ids[rng.integers(0, len(ids), args.lookups)]]
    batches = [ids[rng.integers(0, len(ids), BATCH)] for _ in range(200)]
    directory = Path(tempfile.mkdtemp(prefix="conveyor-bench-mmapsync-", dir=TMPFS))
    emit("timer_overhead.p50", percentile(time_each(lambda key: None, picks), 0.5), "ns", len(picks))
    try:
        ours = bench_mmapsync(directory, ids, vectors, picks, batches)
        bench_under_writer(directory, args.writer_keys, args.dim, args.writer_seconds)
        theirs = {
            "lmdb": bench_lmdb(directory, ids, vectors, picks, batches),
            "redis": bench_redis(directory, ids, vectors, picks[: args.slow_lookups], batches[:20]),
            "manager_dict": bench_manager(ids, vectors, picks[: args.slow_lookups // 4]),
        }
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    for peer, figures in theirs.items():
        emit(f"ratio.{peer}_over_mmapsync.single_p50", figures["single"] / ours["single"], "x", 1)
        if "batch" in figures:
            emit(f"ratio.{peer}_over_mmapsync.batch_get_many", figures["batch"] / ours["get_many"], "x", 1)
            emit(f"ratio.{peer}_over_mmapsync.batch_take", figures["batch"] / ours["take"], "x", 1)
    emit("machine.cpus", os.cpu_count() or 0, "cores", 1)


if __name__ == "__main__":
    main()
