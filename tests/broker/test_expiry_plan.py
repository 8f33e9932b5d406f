"""Retention expiry costs what expires, not what the shard holds: SQLite's plan for the expiry
statement finds the old payloads through their send-time index and every other step by key, with
no scan of a table anywhere (the coordinator runs it on every shard every 30 seconds)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import conveyor
from conveyor.engine.sqlite.shard import Q


def plan(conn: sqlite3.Connection, query: str, args: dict[str, int]) -> list[str]:
    return [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {query}", args)]


def test_expiry_reads_the_expiring_payloads_through_the_send_time_index(data_dir: Path) -> None:
    cv = conveyor.connect(f"sqlite://{data_dir}")
    q = cv.create_queue("q")
    for _ in range(20):
        q.send_batch([{"body": n} for n in range(100)])
    conn = sqlite3.connect(data_dir / "shards" / f"{q.id}.0.db")
    conn.execute("ANALYZE")  # the plan holds with the statistics of a full shard, not only without any

    steps = plan(conn, Q["expire"], {"cutoff": 1})

    assert any("USING COVERING INDEX payloads_timestamp (timestamp_ms<?)" in step for step in steps), steps
    assert not any(step.startswith("SCAN") for step in steps), steps
    conn.close()
    cv.close()


def test_the_other_maintenance_reads_of_a_shard_use_its_indexes(data_dir: Path) -> None:
    """In-flight counts (the shard splitter samples counters), the next visible time (a waiting
    consumer) and the oldest message (metrics) are index lookups too; only purge reads the whole
    table, and it deletes the whole table."""
    cv = conveyor.connect(f"sqlite://{data_dir}")
    q = cv.create_queue("q")
    q.send_batch([{"body": n} for n in range(100)])
    conn = sqlite3.connect(data_dir / "shards" / f"{q.id}.0.db")

    for query, args in (("in_flight", {"now": 1}), ("next_visible", {})):
        [step] = plan(conn, Q[query], args)
        assert step.startswith("SEARCH messages USING") and "INDEX messages_visible" in step, (query, step)
    oldest = plan(conn, Q["oldest"], {})
    assert "SEARCH payloads USING INDEX payloads_moved" in oldest
    assert "USE TEMP B-TREE FOR ORDER BY" not in oldest  # the first by seq: the rowid order, no sort
    conn.close()
    cv.close()
