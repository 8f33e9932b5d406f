"""Retention expiry costs what expires, not what the partition holds: PostgreSQL's plan for the
expiry statement reads the old messages through the send-time index (migration 0007), and a
deployment migrated before it gains the index on its existing partitions."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from conveyor.engine.postgres import PostgresEngine, migrate
from conveyor.engine.postgres.engine import Q
from conveyor.model import NewMessage, QueueSettings


def plan_nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node, *(n for child in node.get("Plans", []) for n in plan_nodes(child))]


def expiry_plan(url: str, shard_key: int, cutoff: int) -> list[dict[str, Any]]:
    with psycopg.connect(url) as conn:
        conn.execute(f"ANALYZE messages_{shard_key}")
        args = {"shard": shard_key, "cutoff": cutoff, "slot": 0}
        (raw,) = conn.execute(b"EXPLAIN (FORMAT JSON) " + Q["expire"], args).fetchone()
    document = raw if isinstance(raw, list) else json.loads(raw)
    return plan_nodes(document[0]["Plan"])


def test_expiry_reads_the_expiring_messages_through_the_send_time_index(pg_url: str) -> None:
    engine = PostgresEngine(pg_url)
    queue = engine.create_queue("q", QueueSettings()).queue_id
    for _ in range(50):
        engine.enqueue(queue, [NewMessage(b"x" * 100, "bytes", 0)] * 100)
    key = engine.shard_map(queue).all[0].key
    engine.close()

    nodes = expiry_plan(pg_url, key, cutoff=1)  # nothing is that old: the index finds none, at once

    scans = [n for n in nodes if n["Node Type"].endswith("Scan") and n.get("Relation Name") == f"messages_{key}"]
    assert scans, nodes
    assert all(n["Node Type"] in ("Index Scan", "Index Only Scan", "Bitmap Heap Scan") for n in scans), scans
    indexes = {n.get("Index Name") for n in nodes if "Index" in n["Node Type"]}
    assert any(name and "timestamp" in name for name in indexes), indexes


def test_a_deployment_migrated_before_the_index_gains_it_on_its_partitions(pg_url: str) -> None:
    engine = PostgresEngine(pg_url)
    queue = engine.create_queue("q", QueueSettings()).queue_id
    engine.enqueue(queue, [NewMessage(b"x", "bytes", 0)] * 10)
    key = engine.shard_map(queue).all[0].key
    engine.close()
    with psycopg.connect(pg_url) as conn:  # as version 6 left it
        conn.execute("DROP INDEX messages_timestamp")
        conn.execute("DELETE FROM conveyor_migrations WHERE version = 7")

    assert migrate(pg_url) == [7]

    with psycopg.connect(pg_url) as conn:
        partition_indexes = [
            definition
            for (definition,) in conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = %s",
                (f"messages_{key}",),
            )
        ]
    assert any("(shard_key, timestamp_ms)" in d for d in partition_indexes), partition_indexes
    engine = PostgresEngine(pg_url)
    assert engine.metrics(queue).backlog_count == 10
    engine.close()
