"""Shard files of older schema versions are upgraded in place on open: version 1 (body and delivery
state in one row) and version 2 (no index on the send time, so retention expiry read the whole
shard). Every message, its attempts and its lease survive, and the backlog counts stay right."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import conveyor
from conveyor.engine.sqlite.shard import SCHEMA_VERSION
from conveyor.model import QueueSettings

V1_SCHEMA = (Path(__file__).parent / "shard_v1.sql").read_text()


def reopened(data_dir: Path, backlog: int) -> tuple[conveyor.Conveyor, conveyor.Queue]:
    """The deployment opened again (which upgrades its shards), with queue ``old`` holding ``backlog``."""
    cv = conveyor.connect(f"sqlite://{data_dir}")
    q = cv.queue("old")
    assert q.metrics().backlog_count == backlog
    return cv, q


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

    cv, q = reopened(data_dir, backlog=3)
    pulled = q.pull(batch_size=10)
    assert [(m.id, m.body, m.attempts) for m in pulled] == [("a" * 32, {"n": 1}, 1), ("b" * 32, "two", 3)]
    assert q.ack(acks=[m.lease_id for m in pulled]).ack_count == 2
    metrics = q.metrics()
    assert (metrics.backlog_count, metrics.backlog_bytes) == (1, 2)
    assert [m.id for m in q.peek(10)] == ["c" * 32]
    cv.close()

    check = sqlite3.connect(shard)
    assert check.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert check.execute("SELECT count(*) FROM payloads").fetchone() == (1,)
    check.close()


class LaterClock:
    """A clock far past any retention period."""

    def now_ms(self) -> int:
        return 2**52


def test_version_2_shard_gains_the_send_time_index_and_keeps_every_message(data_dir: Path) -> None:
    cv = conveyor.connect(f"sqlite://{data_dir}")
    q = cv.create_queue("old", message_retention_period=60)
    q.send_batch([{"body": n} for n in range(5)])
    queue_id = q.id
    cv.close()

    # Version 3 is version 2 with the index: without it (and with the older number), a v2 file.
    shard = data_dir / "shards" / f"{queue_id}.0.db"
    old = sqlite3.connect(shard, isolation_level=None)
    old.execute("DROP INDEX payloads_timestamp")
    old.execute("PRAGMA user_version = 2")
    old.close()

    cv, q = reopened(data_dir, backlog=5)
    check = sqlite3.connect(shard)
    assert check.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    indexes = {name for (name,) in check.execute("SELECT name FROM sqlite_schema WHERE type = 'index'")}
    assert "payloads_timestamp" in indexes
    check.close()
    engine = cv.engine.deployment_engine()
    assert engine is not None
    engine.update_queue(q.id, QueueSettings(message_retention_period=1))
    engine.clock = LaterClock()
    assert engine.expire() == {queue_id: 5}
    assert q.metrics().backlog_count == 0
    cv.close()
