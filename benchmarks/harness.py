"""What every queue benchmark shares: the JSON line it prints, the 1 KB body, the raw SQLite baseline.

A benchmark script prints one JSON object per measurement, ``{"name", "value", "unit", "n",
"params"}``, and measures its comparisons (raw SQLite, peers) in the same run, so that the ratios
it prints compare figures taken under the same load on this shared machine.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

try:
    from conveyor import allocator
except ImportError:  # a peer's own environment, without Conveyor: see peer_process_environment
    pass
else:
    # A benchmark is a Conveyor process, and opts in to its allocator setting as `conveyor worker`
    # and `conveyor serve` do; the raw baselines run under it too, from the first round on: the
    # ratios compare the work, not glibc's handing memory back to the kernel.
    allocator.keep_freed_memory()

BODY_BYTES = 1024
_PAD = "x" * BODY_BYTES


def body(i: int, sent: float | None = None) -> dict[str, Any]:
    """A JSON body that encodes to exactly ``BODY_BYTES`` bytes (compact JSON, as Conveyor stores it)."""
    head = {"i": i, "sent": time.time() if sent is None else sent, "pad": ""}
    size = len(json.dumps(head, separators=(",", ":")))
    head["pad"] = _PAD[: max(0, BODY_BYTES - size)]
    return head


def encoded_body(i: int) -> bytes:
    """The stored bytes of :func:`body`: what the raw baselines write."""
    return json.dumps(body(i), separators=(",", ":")).encode()


def emit(name: str, value: float, unit: str, n: int, **params: Any) -> None:
    """Print one measurement as a JSON line (with the load average at the time, as a noise marker)."""
    params.setdefault("load1", round(os.getloadavg()[0], 2))
    line = {"name": name, "value": round(value, 4), "unit": unit, "n": n, "params": params}
    print(json.dumps(line), flush=True)


def ratio(name: str, ours: float, theirs: float, n: int, target: float | None = None, **params: Any) -> None:
    """Print ``ours / theirs`` as a ratio line, with the target it is held against (if any)."""
    value = ours / theirs if theirs else float("inf")
    if target is not None:
        params["target"] = target
        params["met"] = value >= target
    emit(name, value, "ratio", n, **params)


def arguments(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="a smoke run: small counts, well under a minute")
    return parser.parse_args()


@contextmanager
def scratch_directory(prefix: str) -> Iterator[Path]:
    """A fresh directory on the same disk as a real deployment would use, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=f"conveyor-bench-{prefix}-") as path:
        yield Path(path)


def quiet_logs() -> None:
    """Keep the worker's info logs (concurrency changes) out of the JSON output."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)


def wait_until_handled(app: Any, queue: str, count: int, timeout: float = 600.0) -> None:
    """Poll until ``app``'s consumer of ``queue`` has settled ``count`` messages; a broken build fails, not hangs."""
    dispatcher = app.dispatchers[queue]
    deadline = time.monotonic() + timeout
    while dispatcher.handled < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {dispatcher.handled} of {count} messages were handled in {timeout:g} s")
        time.sleep(0.001)


def peer_environment(directory: Path, pins: Sequence[str]) -> Path:
    """The Python of a virtual environment holding the peers' pinned packages, made (or remade when
    the pins changed) on first use, apart from Conveyor's own environment."""
    python = directory / "bin" / "python"
    marker = directory / "pins.txt"
    wanted = "\n".join(pins)
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(directory)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *pins], check=True)
    marker.write_text(wanted)
    return python


def peer_process_environment() -> dict[str, str]:
    """The environment of a peer's process: glibc's malloc set as ``conveyor.allocator`` sets
    Conveyor's processes (through glibc's own variables), so neither side has that advantage."""
    return {
        **os.environ,
        "MALLOC_TRIM_THRESHOLD_": str(allocator.TRIM_THRESHOLD_BYTES),
        "MALLOC_MMAP_THRESHOLD_": str(allocator.MMAP_THRESHOLD_BYTES),
    }


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by the inclusive method; enough for latency tails of a few hundred."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q) - 1]


# -- the raw SQLite limit -------------------------------------------------------------------------
# A plain indexed table with Conveyor's durability (WAL, synchronous=FULL: Conveyor flushes the log
# itself after each durable commit, the same fdatasync) and no queue logic: the physical limit a
# queue on this disk can approach.
RAW_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    seq           INTEGER PRIMARY KEY,
    id            TEXT NOT NULL,
    timestamp_ms  INTEGER NOT NULL,
    visible_at_ms INTEGER NOT NULL,
    body          BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_visible ON messages (visible_at_ms);
"""
RAW_INSERT = "INSERT INTO messages (id, timestamp_ms, visible_at_ms, body) VALUES (?, ?, ?, ?)"
RawRow = tuple[str, int, int, bytes]


def raw_connection(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=60.0)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.executescript(RAW_SCHEMA)
    return conn


def raw_rows(start: int, count: int) -> list[RawRow]:
    now = time.time_ns() // 1_000_000
    return [(os.urandom(16).hex(), now, now, encoded_body(i)) for i in range(start, start + count)]


def raw_insert_batch(conn: sqlite3.Connection, rows: Sequence[RawRow]) -> None:
    """One transaction, one fsync: ``executemany`` of ``rows``."""
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(RAW_INSERT, rows)
    conn.execute("COMMIT")


def raw_single_commit(conn: sqlite3.Connection, row: RawRow) -> None:
    """One autocommitted ``INSERT``: SQLite's own commit and, at synchronous=FULL, its own flush of
    the log. The limit of one durable message per call on this disk."""
    conn.execute(RAW_INSERT, row)
