"""``conveyor serve`` on the PostgreSQL engine: accounts need nothing of the engine but opaque names."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from cloudflare import Cloudflare

from tests.engine.postgres.support import ThrowawayEngine, schema_url

from .process import create_token, serve_process


def test_serve_on_postgres_speaks_the_api_and_keeps_accounts_apart(tmp_path: Path) -> None:
    engine = ThrowawayEngine()  # makes the schema (dropped when the test process exits)
    engine.close()
    url = schema_url(engine.schema)
    data = tmp_path / "data"
    with serve_process(data, "alice", url=url) as proc:
        bob_token = create_token(data, "bob", url=url)
        alice = Cloudflare(api_token=proc.token, base_url=proc.url + "/client/v4", max_retries=0)
        bob = Cloudflare(api_token=bob_token, base_url=proc.url + "/client/v4", max_retries=0)
        qid = alice.queues.create(account_id="alice", queue_name="emails").queue_id or ""  # type: ignore[union-attr]
        alice.queues.consumers.create(qid, account_id="alice", type="http_pull", dead_letter_queue="emails-dlq")
        alice.queues.messages.push(qid, account_id="alice", body={"to": "a@b"})
        bob.queues.create(account_id="bob", queue_name="emails")

        pulled = alice.queues.messages.pull(qid, account_id="alice", batch_size=10)
        assert pulled is not None and len(pulled.messages or []) == 1
        message = (pulled.messages or [])[0]
        assert json.loads(base64.b64decode(message.body or "")) == {"to": "a@b"}
        acked = alice.queues.messages.ack(qid, account_id="alice", acks=[{"lease_id": message.lease_id or ""}])
        assert acked is not None and acked.ack_count == 1

        assert [q.queue_name for q in bob.queues.list(account_id="bob")] == ["emails"]
        assert [q.queue_name for q in alice.queues.list(account_id="alice")] == ["emails"]
