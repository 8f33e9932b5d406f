"""A lone send's statements in plain SQL, with the flush of the log after each commit, for the
shard layouts weighed in issue 11: the counts written to the ``stats`` row (schema version 2) or
only read (version 3 on); the state row indexed by time (versions 2 and 3) or stored fresh, out of
the index (version 4); 8 KiB or 4 KiB pages. The variants take turns 250 sends at a time; each line
gives the sends per second and the write-ahead log's frames per send.

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
# (name, page size, counts written, fresh)
VARIANTS = (("8 KiB, counts written, indexed (v2)", 8192, True, False),
            ("8 KiB, counts read, indexed (v3)", 8192, False, False),
            ("8 KiB, counts read, fresh (v4)", 8192, False, True),
            ("4 KiB, counts read, indexed", 4096, False, False),
            ("4 KiB, counts read, fresh", 4096, False, True))  # fmt: skip
CHUNK = 250


def open_shard(path: Path, page_size: int) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA page_size = {page_size}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")  # the log is flushed below, as group commit does
    conn.execute(f"PRAGMA wal_autocheckpoint = {16 * 1024 * 1024 // page_size}")
    conn.executescript(SCHEMA)
    return conn


def log_frames(log_fd: int) -> int:
    """The frames in the write-ahead log (``mxFrame`` of the header of its index, the -shm file)."""
    return int.from_bytes(os.pread(log_fd, 4, 16), sys.byteorder)


def send(conn: sqlite3.Connection, log_fd: int, body: bytes, ts: int, write_counts: bool, fresh: bool) -> None:
    conn.execute("BEGIN IMMEDIATE")
    seq = conn.execute(
        "INSERT INTO payloads (id, timestamp_ms, content_type, body) VALUES (?, ?, 'json', ?)",
        (os.urandom(16).hex(), ts, body),
    ).lastrowid
    conn.execute(
        "INSERT INTO messages (seq, visible_at_ms, size, fresh) VALUES (?, ?, ?, ?)", (seq, ts, len(body), fresh)
    )
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
        shards: dict[str, tuple[sqlite3.Connection, int, int]] = {}
        for name, page_size, _, _ in VARIANTS:
            path = Path(directory) / f"{page_size}-{len(shards)}.db"
            conn = open_shard(path, page_size)
            shards[name] = (conn, os.open(f"{path}-wal", os.O_RDONLY), os.open(f"{path}-shm", os.O_RDONLY))
        seconds = dict.fromkeys(shards, 0.0)
        frames = dict.fromkeys(shards, 0)
        for start in range(0, count, CHUNK):
            for name, _, write_counts, fresh in VARIANTS:
                conn, fd, index_fd = shards[name]
                for i in range(start, min(count, start + CHUNK)):
                    before = log_frames(index_fd)
                    began = time.perf_counter()
                    send(conn, fd, body, 1_700_000_000_000 + i, write_counts, fresh)
                    seconds[name] += time.perf_counter() - began
                    after = log_frames(index_fd)
                    frames[name] += after - before if after >= before else after  # a wrap: from the start
        for name, (conn, fd, index_fd) in shards.items():
            os.close(fd)
            os.close(index_fd)
            conn.close()
            rate = count / seconds[name]
            per_send = frames[name] / count
            print(f"{name}: {rate:,.0f} lone sends/s, {per_send:.2f} log frames a send (load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
