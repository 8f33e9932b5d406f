"""Retention expiry costs what expires, not what the partition holds: PostgreSQL's plans for the
expiry boundary and the delete read the old messages through the primary key (seq order) and the
moved messages' index, never a scan of the partition."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.postgres.engine import Q
from conveyor.model import NewMessage, QueueSettings


class ManualClock:
    def __init__(self) -> None:
        self.ms = 1_800_000_000_000

    def now_ms(self) -> int:
        return self.ms


def plan_nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node, *(n for child in node.get("Plans", []) for n in plan_nodes(child))]


def planned_scans(conn: psycopg.Connection[tuple[Any, ...]], query: bytes, args: dict[str, int]) -> list[str]:
    """(node type, index) of every scan of a messages partition in the statement's plan."""
    row = conn.execute(b"EXPLAIN (FORMAT JSON) " + query, args).fetchone()
    assert row is not None
    document = row[0] if isinstance(row[0], list) else json.loads(row[0])
    return [
        f"{n['Node Type']} {n.get('Index Name', '')}".strip()
        for n in plan_nodes(document[0]["Plan"])
        if str(n.get("Relation Name", "")).startswith("messages_")
    ]


def test_expiry_reads_the_expiring_messages_by_key_not_the_partition(pg_url: str) -> None:
    engine = PostgresEngine(pg_url)
    clock = engine.clock = ManualClock()
    queue = engine.create_queue("q", QueueSettings(message_retention_period=1800)).queue_id
    engine.enqueue(queue, [NewMessage(b"old", "bytes", 0)] * 100)
    clock.ms += 3_600_000
    for _ in range(100):
        engine.enqueue(queue, [NewMessage(b"x" * 100, "bytes", 0)] * 100)
    key = engine.shard_map(queue).all[0].key
    cutoff = clock.ms - 1800 * 1000  # what expire() computes: the old hundred are past it
    with psycopg.connect(pg_url) as conn:
        conn.execute(f"ANALYZE messages_{key}")
        args = {"shard": key, "cutoff": cutoff}
        boundary = conn.execute(Q["expiry_boundary"], args).fetchone()
        assert boundary is not None
        scans = planned_scans(conn, Q["expiry_boundary"], args)
        scans += planned_scans(conn, Q["expire"], {**args, "boundary": boundary[0], "slot": 0})

    assert scans, scans
    assert not any(scan.startswith("Seq Scan") for scan in scans), scans
    assert any(scan.endswith("_pkey") for scan in scans), scans
    # The partition's copy of messages_moved (shard_key, timestamp_ms) WHERE moved, named by PostgreSQL.
    assert any(scan.endswith("_shard_key_timestamp_ms_idx") for scan in scans), scans
    assert engine.expire() == {queue: 100}
    assert engine.metrics(queue).backlog_count == 10_000
    engine.close()
