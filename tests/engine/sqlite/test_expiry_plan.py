"""Retention expiry costs what expires, not what the shard holds (the coordinator runs it on every
shard every 30 seconds): it walks the payloads in seq order, which is send-time order for sent
messages, up to the first one still within retention, and finds moved messages by their index."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import conveyor
from conveyor.engine.sqlite.shard import Q


class ManualClock:
    def __init__(self) -> None:
        self.ms = 1_800_000_000_000

    def now_ms(self) -> int:
        return self.ms


def shard_with(data_dir: Path, name: str, old: int, young: int) -> tuple[Path, int]:
    """A queue's shard holding ``old`` messages sent an hour before ``young`` ones; and a cutoff
    between the two."""
    cv = conveyor.connect(f"sqlite://{data_dir}")
    engine = cv.engine.deployment_engine()
    assert engine is not None
    clock = engine.clock = ManualClock()
    q = cv.create_queue(name)
    for count in (old, young):
        for start in range(0, count, 100):
            q.send_batch([{"body": n} for n in range(start, min(count, start + 100))])
        clock.ms += 3_600_000
    cv.close()
    return data_dir / "shards" / f"{q.id}.0.db", clock.ms - 3_600_000 - 1


def expiry_cost(path: Path, cutoff: int) -> tuple[int, int]:
    """(messages expired, SQLite virtual-machine steps it took), rolled back afterwards."""
    conn = sqlite3.connect(path, isolation_level=None)
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn.execute("BEGIN")
    conn.set_progress_handler(count, 1)
    expired = len(conn.execute(Q["expire"], {"cutoff": cutoff}).fetchall())
    conn.set_progress_handler(None, 1)
    conn.execute("ROLLBACK")
    conn.close()
    return expired, steps


def test_expiry_costs_what_expires_not_what_the_shard_holds(data_dir: Path) -> None:
    small, small_cutoff = shard_with(data_dir, "small", old=100, young=100)
    large, large_cutoff = shard_with(data_dir, "large", old=100, young=20_000)

    small_expired, small_steps = expiry_cost(small, small_cutoff)
    large_expired, large_steps = expiry_cost(large, large_cutoff)

    assert small_expired == large_expired == 100
    # A read of every payload would take 100 times the steps for a shard 100 times the size.
    assert large_steps < 1.2 * small_steps, (small_steps, large_steps)


def test_expiry_plan_walks_the_seq_order_and_the_moved_index(data_dir: Path) -> None:
    path, _ = shard_with(data_dir, "q", old=100, young=100)
    conn = sqlite3.connect(path)
    steps = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {Q['expire']}", {"cutoff": 1})]
    conn.close()

    assert "SEARCH payloads USING INTEGER PRIMARY KEY (rowid<?)" in steps, steps
    assert any("INDEX payloads_moved (timestamp_ms<?)" in step for step in steps), steps
    # The one walk is the boundary's, in seq (rowid) order and stopping at its first row: no sort.
    assert [step for step in steps if step.startswith("SCAN")] == ["SCAN payloads"], steps
    assert not any("TEMP B-TREE" in step for step in steps), steps
