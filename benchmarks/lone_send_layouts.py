"""A lone send's statements in plain SQL, with the flush of the log after each commit, for the
shard layouts weighed in issue 11: the counts written to the ``stats`` row (schema version 2) or
only read (version 3), with 8 KiB or 4 KiB pages. The variants take turns 250 sends at a time.

    .venv/bin/python benchmarks/lone_send_layouts.py [SENDS]
"""

from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from harness import encoded_body

SCHEMA = (Path(__file__).resolve().parent.parent / "src/conveyor/engine/sqlite/shard.sql").read_text()
VARIANTS = (("8 KiB, counts written", 8192, True), ("8 KiB, counts read", 8192, False),
            ("4 KiB, counts read", 4096, False), ("4 KiB, counts written", 4096, True))  # fmt: skip
CHUNK = 250


def open_shard(path: Path, page_size: int) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA page_size = {page_size}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")  # the log is flushed below, as group commit does
    conn.execute(f"PRAGMA wal_autocheckpoint = {16 * 1024 * 1024 // page_size}")
    conn.executescript(SCHEMA)
    return conn


def send(conn: sqlite3.Connection, log_fd: int, body: bytes, ts: int, write_counts: bool) -> None:
    conn.execute("BEGIN IMMEDIATE")
    seq = conn.execute(
        "INSERT INTO payloads (id, timestamp_ms, content_type, body) VALUES (?, ?, 'json', ?)",
        (os.urandom(16).hex(), ts, body),
    ).lastrowid
    conn.execute("INSERT INTO messages (seq, visible_at_ms, size) VALUES (?, ?, ?)", (seq, ts, len(body)))
    if write_counts:
        conn.execute(
            "UPDATE stats SET backlog_count = backlog_count + 1, backlog_bytes = backlog_bytes + ?, "
            "sent = sent + 1 WHERE deleted = 0 RETURNING backlog_count",
            (len(body),),
        ).fetchone()
    else:
        conn.execute("SELECT backlog_count, deleted FROM stats").fetchone()
    conn.execute("COMMIT")
    os.fdatasync(log_fd)


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    body = encoded_body(1)
    with tempfile.TemporaryDirectory(prefix="conveyor-bench-layouts-") as directory:
        shards = {}
        for name, page_size, _ in VARIANTS:
            path = Path(directory) / f"{page_size}-{len(shards)}.db"
            conn = open_shard(path, page_size)
            shards[name] = (conn, os.open(f"{path}-wal", os.O_RDONLY))
        seconds = dict.fromkeys(shards, 0.0)
        for start in range(0, count, CHUNK):
            for name, _, write_counts in VARIANTS:
                conn, fd = shards[name]
                began = time.perf_counter()
                for i in range(start, min(count, start + CHUNK)):
                    send(conn, fd, body, 1_700_000_000_000 + i, write_counts)
                seconds[name] += time.perf_counter() - began
        for name, (conn, fd) in shards.items():
            os.close(fd)
            conn.close()
            print(f"{name}: {count / seconds[name]:,.0f} lone sends/s (load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
