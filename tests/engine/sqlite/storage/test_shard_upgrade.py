"""A shard file of schema version 1 (body and delivery state in one row) is upgraded in place on
open: every message, its attempts and its lease survive, and the backlog counts stay right."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import conveyor
from conveyor.engine.sqlite.shard import SCHEMA_VERSION

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
    assert check.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert check.execute("SELECT count(*) FROM payloads").fetchone() == (1,)
    check.close()


V2_SCHEMA = (Path(__file__).parent / "shard_v2.sql").read_text()


def test_version_2_shard_is_upgraded_and_its_counts_stay_exact(data_dir: Path) -> None:
    """Version 3 counts lone sends on read (``counted_through``): a version 2 file, whose every
    message is counted in ``stats``, keeps its counts, and sends, acks and purges after it add up."""
    cv = conveyor.connect(f"sqlite://{data_dir}")
    q = cv.create_queue("old")
    q.add_pull_consumer(visibility_timeout_ms=60_000)
    queue_id = q.id
    cv.close()

    shard = data_dir / "shards" / f"{queue_id}.0.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{shard}{suffix}").unlink(missing_ok=True)
    old = sqlite3.connect(shard, isolation_level=None)
    old.execute("PRAGMA page_size = 8192")
    old.executescript(V2_SCHEMA)
    now = 1_700_000_000_000
    for i, body in enumerate([b'{"n":1}', b'{"n":22}', b'"three"']):
        seq = old.execute(
            "INSERT INTO payloads (id, timestamp_ms, content_type, body) VALUES (?, ?, 'json', ?)",
            (f"{i:032d}", now + i, body),
        ).lastrowid
        old.execute("INSERT INTO messages (seq, visible_at_ms, size) VALUES (?, ?, ?)", (seq, now + i, len(body)))
    old.execute("UPDATE stats SET backlog_count = 3, backlog_bytes = 22, sent = 5, acked = 2")
    old.execute("PRAGMA journal_mode = WAL")
    old.close()

    cv = conveyor.connect(f"sqlite://{data_dir}")
    q = cv.queue("old")
    metrics = q.metrics()
    assert (metrics.backlog_count, metrics.backlog_bytes, metrics.oldest_message_timestamp_ms) == (3, 22, now)
    assert (q.counters().sent, q.counters().acked) == (5, 2)
    check = sqlite3.connect(shard)
    assert check.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert check.execute("SELECT counted_through FROM stats").fetchone() == (3,)

    sent = q.send({"n": 4})  # a lone send: counted on read, not in the row
    assert (sent.metrics.backlog_count, sent.metrics.backlog_bytes) == (4, 29)
    assert check.execute("SELECT backlog_count, sent, counted_through FROM stats").fetchone() == (3, 5, 3)
    assert q.counters().sent == 6

    pulled = q.pull(batch_size=10)
    assert [m.body for m in pulled] == [{"n": 1}, {"n": 22}, "three", {"n": 4}]
    assert q.ack(acks=[m.lease_id for m in pulled[1:]]).ack_count == 3  # the top seqs: given again
    assert check.execute("SELECT backlog_count, sent, counted_through FROM stats").fetchone() == (1, 6, 1)
    assert q.send("again").metrics.backlog_count == 2
    assert (q.metrics().backlog_count, q.metrics().backlog_bytes, q.counters().sent) == (2, 7 + 7, 7)
    assert q.purge() == 2
    assert (q.metrics().backlog_count, q.counters().sent, q.counters().acked) == (0, 7, 5)
    check.close()
    cv.close()


V3_SCHEMA = (Path(__file__).parent / "shard_v3.sql").read_text()


def test_version_3_shard_is_upgraded_and_delivers_old_and_new_messages_in_order(data_dir: Path) -> None:
    """Version 4 leaves fresh messages out of the time index: a version 3 file's messages stay in it
    (not fresh), leased ones stay leased, and sends after the upgrade come after them."""
    cv = conveyor.connect(f"sqlite://{data_dir}")
    q = cv.create_queue("old")
    q.add_pull_consumer(visibility_timeout_ms=60_000)
    queue_id = q.id
    cv.close()

    shard = data_dir / "shards" / f"{queue_id}.0.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{shard}{suffix}").unlink(missing_ok=True)
    old = sqlite3.connect(shard, isolation_level=None)
    old.execute("PRAGMA page_size = 8192")
    old.executescript(V3_SCHEMA)
    now = 1_700_000_000_000
    states = [(now, 0, None), (2**62, 1, 77), (now + 1, 0, None)]  # the second is leased far ahead
    for i, (visible_at, attempts, lease) in enumerate(states):
        seq = old.execute(
            "INSERT INTO payloads (id, timestamp_ms, content_type, body) VALUES (?, ?, 'json', ?)",
            (f"{i:032d}", now + i, f'"m{i}"'.encode()),
        ).lastrowid
        old.execute(
            "INSERT INTO messages (seq, visible_at_ms, attempts, lease, size) VALUES (?, ?, ?, ?, 4)",
            (seq, visible_at, attempts, lease),
        )
    old.execute("PRAGMA journal_mode = WAL")
    old.close()

    cv = conveyor.connect(f"sqlite://{data_dir}")
    q = cv.queue("old")
    assert (q.metrics().backlog_count, q.counters().in_flight) == (3, 1)
    q.send("new")
    check = sqlite3.connect(shard)
    assert check.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert check.execute("SELECT seq, fresh FROM messages ORDER BY seq").fetchall() == [(1, 0), (2, 0), (3, 0), (4, 1)]
    assert [m.body for m in q.peek(10)] == ["m0", "m2", "new", "m1"]
    assert [m.body for m in q.pull(batch_size=10)] == ["m0", "m2", "new"]
    assert q.pull(batch_size=10) == []
    check.close()
    cv.close()
