"""Connections cut under a running client come back by themselves; nothing acknowledged is lost."""

from __future__ import annotations

import conveyor
from tests.engine.postgres.support import terminate_connections


def test_clients_reconnect_after_their_connections_are_killed(pg_client: conveyor.Conveyor, schema: str) -> None:
    q = pg_client.create_queue("q")
    q.add_pull_consumer()
    q.send({"n": 1})
    assert terminate_connections(schema) > 0
    q.send({"n": 2})
    pulled = q.pull(batch_size=10)
    assert sorted(m.body["n"] for m in pulled) == [1, 2]
    assert terminate_connections(schema) > 0
    assert q.ack(acks=[m.lease_id for m in pulled]).ack_count == 2
    assert q.metrics().backlog_count == 0
