"""A shard file of schema version 1 (body and delivery state in one row) is upgraded in place on
open: every message, its attempts and its lease survive, and the backlog counts stay right."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import conveyor

V1_SCHEMA = (Path(__file__).parent / "shard_v1.sql").read_text()


def test_version_1_shard_is_upgraded_with_every_message(data_dir: Path) -> None:
    cv = conveyor.connect(f"sqlite://{data_dir}")
    q = cv.create_queue("old")
    q.add_pull_consumer(visibility_timeout_ms=60_000)
    queue_id = q.id
    cv.close()

    shard = data_dir / "shards" / f"{queue_id}.0.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{shard}{suffix}").unlink(missing_ok=True)
    old = sqlite3.connect(shard, isolation_level=None)
    old.executescript(V1_SCHEMA)
    now = 1_700_000_000_000
    rows = [
        # id, timestamp, visible_at, attempts, lease, content type, body
        ("a" * 32, now, now, 0, None, "json", b'{"n":1}'),
        ("b" * 32, now + 1, now + 1, 2, None, "text", b"two"),
        ("c" * 32, now + 2, 2**62, 1, 77, "bytes", b"\x00\x03"),  # leased far into the future
    ]
    old.executemany(
        "INSERT INTO messages (id, timestamp_ms, visible_at_ms, attempts, lease, content_type, body) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    old.execute("UPDATE stats SET backlog_count = 3, backlog_bytes = 12, sent = 3")
    old.execute("PRAGMA journal_mode = WAL")
    old.close()

    cv = conveyor.connect(f"sqlite://{data_dir}")
    q = cv.queue("old")
    assert q.metrics().backlog_count == 3
    pulled = q.pull(batch_size=10)
    assert [(m.id, m.body, m.attempts) for m in pulled] == [("a" * 32, {"n": 1}, 1), ("b" * 32, "two", 3)]
    assert q.ack(acks=[m.lease_id for m in pulled]).ack_count == 2
    metrics = q.metrics()
    assert (metrics.backlog_count, metrics.backlog_bytes) == (1, 2)
    assert [m.id for m in q.peek(10)] == ["c" * 32]
    cv.close()

    check = sqlite3.connect(shard)
    assert check.execute("PRAGMA user_version").fetchone() == (2,)
    assert check.execute("SELECT count(*) FROM payloads").fetchone() == (1,)
    check.close()
