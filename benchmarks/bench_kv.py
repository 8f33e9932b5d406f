"""Storage beside the queues against the raw database work it stands on, measured in one run.

KV get: ``kv.get(key)`` of a 1 KB value (``cv.kv(...)``, the public API: key checks, the one
query that also checks the namespace's account, the value decoded) ÷ a raw primary-key ``SELECT``
of the same 1 KB value from a table of the same shape on the same engine (SQLite: a WAL file with
``synchronous=FULL``; PostgreSQL: the local server, one autocommit connection). Both read the same
shuffled keys from one thread; the figure is mean seconds per read, and the ratio's target is
``≤ 3``. Bucket figures (put and get against obstore) are meant to join ``FIGURES`` below.

Usage: ``.venv/bin/python benchmarks/bench_kv.py [--quick] [--only kv_get_sqlite,...]``; one
JSON line per measurement (``harness.emit``).
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import conveyor  # noqa: E402
from harness import emit, scratch_directory  # noqa: E402

SERVER = os.environ.get("CONVEYOR_BENCH_PG", "postgresql://127.0.0.1:5432/test")
VALUE = os.urandom(1024)
KV_TARGET = 3.0


def keys(count: int) -> list[str]:
    return [f"package/{i:06}/meta.json" for i in range(count)]


def timed_reads(read: Callable[[str], object], order: list[str]) -> float:
    """Mean seconds per ``read(key)`` over ``order`` (after one warm pass over a tenth of it)."""
    for key in order[: len(order) // 10]:
        read(key)
    started = time.perf_counter()
    for key in order:
        read(key)
    return (time.perf_counter() - started) / len(order)


def report(engine: str, ours: float, raw: float, n: int) -> None:
    emit(f"kv_get_{engine}", ours * 1e6, "us/op", n)
    emit(f"raw_pk_select_{engine}", raw * 1e6, "us/op", n)
    value = ours / raw
    emit(f"kv_get_vs_raw_select_{engine}", value, "ratio", n, target=f"<= {KV_TARGET}", met=value <= KV_TARGET)


def fill(kv: conveyor.Conveyor, names: list[str]) -> None:
    ns = kv.kv("bench", create=True)
    for start in range(0, len(names), 1000):
        ns.put_many([{"key": k, "value": VALUE} for k in names[start : start + 1000]])


def kv_get_sqlite(n: int, reads: int) -> None:
    names = keys(n)
    order = [random.choice(names) for _ in range(reads)]
    with scratch_directory("kv") as directory:
        cv = conveyor.connect(f"sqlite://{directory / 'data'}")
        fill(cv, names)
        ns = cv.kv("bench")
        raw = sqlite3.connect(directory / "raw.db", isolation_level=None)
        raw.execute("PRAGMA journal_mode = WAL")
        raw.execute("PRAGMA synchronous = FULL")
        raw.execute(
            "CREATE TABLE t (namespace_id TEXT, key TEXT, value BLOB, PRIMARY KEY (namespace_id, key)) WITHOUT ROWID"
        )
        raw.execute("BEGIN")
        raw.executemany("INSERT INTO t VALUES ('ns', ?, ?)", [(k, VALUE) for k in names])
        raw.execute("COMMIT")

        def raw_read(key: str) -> object:
            return raw.execute("SELECT value FROM t WHERE namespace_id = 'ns' AND key = ?", (key,)).fetchone()

        ours, theirs = timed_reads(ns.get, order), timed_reads(raw_read, order)
        report("sqlite", ours, theirs, reads)
        raw.close()
        cv.close()


@contextmanager
def scratch_schema() -> Iterator[str]:
    import psycopg

    schema = f"bench_kv_{secrets.token_hex(4)}"
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield f"{SERVER}?options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(SERVER, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def kv_get_postgres(n: int, reads: int) -> None:
    import psycopg

    names = keys(n)
    order = [random.choice(names) for _ in range(reads)]
    with scratch_schema() as url:
        cv = conveyor.connect(url)
        fill(cv, names)
        ns = cv.kv("bench")
        with psycopg.connect(url, autocommit=True) as raw:
            raw.execute(
                'CREATE TABLE t (namespace_id text, key text COLLATE "C", value bytea, PRIMARY KEY (namespace_id, key))'
            )
            with raw.cursor() as cur:
                cur.executemany("INSERT INTO t VALUES ('ns', %s, %s)", [(k, VALUE) for k in names])

            def raw_read(key: str) -> object:
                return raw.execute("SELECT value FROM t WHERE namespace_id = 'ns' AND key = %s", (key,)).fetchone()

            ours, theirs = timed_reads(ns.get, order), timed_reads(raw_read, order)
        report("postgres", ours, theirs, reads)
        cv.close()


# name -> fn(keys, reads); bucket figures join here.
FIGURES: dict[str, Callable[[int, int], None]] = {
    "kv_get_sqlite": kv_get_sqlite,
    "kv_get_postgres": kv_get_postgres,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run: small counts, seconds")
    parser.add_argument("--only", default="", help="comma-separated figure names (default: all)")
    args = parser.parse_args()
    n, reads = (1000, 2000) if args.quick else (10_000, 20_000)
    wanted = [f for f in args.only.split(",") if f] or list(FIGURES)
    for name in wanted:
        FIGURES[name](n, reads)


if __name__ == "__main__":
    main()
