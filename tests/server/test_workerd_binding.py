"""workerd's queue binding, in its exact wire format: /message, /batch, /metrics under a per-queue prefix."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from conveyor.server.testing import RunningServer


@pytest.fixture
def binding(server: RunningServer) -> tuple[str, dict[str, str]]:
    server.connect("acc1").create_queue("from-worker").add_pull_consumer(batch_size=10)
    secret, _ = server.tokens.create("acc1")
    return f"{server.url}/workerd/accounts/acc1/queues/from-worker", {"authorization": f"Bearer {secret}"}


def test_message_and_batch_sends_store_what_a_worker_sent(
    server: RunningServer, binding: tuple[str, dict[str, str]]
) -> None:
    prefix, auth = binding
    r = httpx.post(prefix + "/message", content=b'{"a":1}', headers={**auth, "X-Msg-Fmt": "json"})
    assert r.status_code == 200
    assert r.json() == {
        "metadata": {
            "metrics": {
                "backlogCount": 1,
                "backlogBytes": 7,
                "oldestMessageTimestamp": r.json()["metadata"]["metrics"]["oldestMessageTimestamp"],
            }
        }
    }
    httpx.post(prefix + "/message", content=b"hi", headers={**auth, "X-Msg-Fmt": "text", "X-Msg-Delay-Secs": "0"})
    batch = {
        "messages": [
            {"body": base64.b64encode(b"\x00\x01").decode(), "contentType": "bytes"},
            {"body": base64.b64encode(json.dumps([1, 2]).encode()).decode(), "contentType": "json", "delaySecs": 0},
        ]
    }
    r = httpx.post(prefix + "/batch", json=batch, headers=auth)
    assert r.status_code == 200 and r.json()["metadata"]["metrics"]["backlogCount"] == 4

    metrics = httpx.get(prefix + "/metrics", headers=auth).json()
    assert metrics["backlogCount"] == 4 and metrics["oldestMessageTimestamp"] > 0

    bodies = sorted(repr(m.body) for m in server.connect("acc1").queue("from-worker").pull(batch_size=10))
    assert bodies == sorted([repr({"a": 1}), repr("hi"), repr(b"\x00\x01"), repr([1, 2])])


def test_delay_header_delays_delivery(server: RunningServer, binding: tuple[str, dict[str, str]]) -> None:
    prefix, auth = binding
    httpx.post(prefix + "/message", content=b"1", headers={**auth, "X-Msg-Fmt": "json", "X-Msg-Delay-Secs": "60"})
    q = server.connect("acc1").queue("from-worker")
    assert q.metrics().backlog_count == 1 and q.pull() == []


@pytest.mark.parametrize(
    ("fmt", "body", "code"),
    [("v8", b"\xff\x0f", "10203"), ("json", b"{nope", "10208"), ("text", b"x" * 128_001, "10204")],
)
def test_refusals_carry_cf_queues_error_headers(
    binding: tuple[str, dict[str, str]], fmt: str, body: bytes, code: str
) -> None:
    prefix, auth = binding
    r = httpx.post(prefix + "/message", content=body, headers={**auth, "X-Msg-Fmt": fmt})
    assert r.status_code in (400, 413)
    assert r.headers["CF-Queues-Error-Code"] == code and r.headers["CF-Queues-Error-Cause"]


def test_unknown_queue_is_404(server: RunningServer, binding: tuple[str, dict[str, str]]) -> None:
    _, auth = binding
    r = httpx.get(f"{server.url}/workerd/accounts/acc1/queues/missing/metrics", headers=auth)
    assert r.status_code == 404 and r.headers["CF-Queues-Error-Code"] == "10104"
