"""The leader vacuums queue tables: dead rows left by leases and acks are cleared, not piled up."""

from __future__ import annotations

import time

import psycopg
import pytest

from conveyor.engine.postgres import PostgresEngine, vacuum
from conveyor.model import DeliveryPolicy, NewMessage, QueueSettings


def dead_rows(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT relname, n_dead_tup FROM pg_stat_user_tables WHERE schemaname = current_schema()"
        ).fetchall()
    return {name: int(dead) for name, dead in rows}


def test_the_vacuumer_clears_dead_rows_of_consumed_messages(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vacuum, "VACUUM_DEAD_ROWS", 500)
    engine = PostgresEngine(pg_url)
    queue = engine.create_queue("q", QueueSettings()).queue_id
    partition = f"messages_{engine.shard_map(queue).all[0].key}"
    policy = DeliveryPolicy()
    for _ in range(10):
        engine.enqueue(queue, [NewMessage(b"x" * 100, "bytes", 0)] * 100)
        leased = engine.lease(queue, 100, 30_000, policy)
        engine.settle(queue, [m.lease_id for m in leased], [], policy)
    engine.close()  # a closing connection hands its statistics in at once
    deadline = time.monotonic() + 30
    while dead_rows(pg_url).get(partition, 0) < 1_000 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert dead_rows(pg_url)[partition] >= 1_000
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert partition in vacuum.Vacuumer(pg_url).vacuum_once(conn)
    assert dead_rows(pg_url)[partition] == 0


def test_the_leader_runs_the_vacuumer_and_stops_it_when_it_steps_down(pg_url: str) -> None:
    engine = PostgresEngine(pg_url)
    try:
        assert engine.acquire_leadership()
        assert engine.vacuumer._thread is not None
        engine.release_leadership()
        assert engine.vacuumer._thread is None
    finally:
        engine.close()
