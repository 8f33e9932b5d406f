"""The engine routes of the remote transport (``/conveyor/v1``) refuse a body field they do not
know, naming it, and change nothing: a misspelt ``delay_seconds`` is not a message sent at once."""

from __future__ import annotations

import httpx
import pytest

from conveyor.server.testing import RunningServer

BODY = "aGk="  # base64 of "hi"

# route -> a body the remote transport would send, with one field it never sends.
MISSPELT = {
    "enqueue": ({"messages": [{"body": BODY, "content_type": "text", "delaySeconds": 3600}]}, "delaySeconds"),
    "lease": ({"max_messages": 1, "visibility_timeout": 5000}, "visibility_timeout"),
    "lease ": ({"max_messages": 1, "policy": {"max_retries": 3, "dlq": "x"}}, "dlq"),
    "extend": ({"lease_ids": [], "visibility_ms": 1000, "extra": 1}, "extra"),
    "settle": ({"acks": [], "retries": [{"lease_id": "x", "delay": 5}]}, "delay"),
    "release": ({"lease_ids": [], "all": True}, "all"),
    "wait": ({"timeout": 0, "forever": True}, "forever"),
    "wake": ({"waiter": "0" * 32, "everyone": True}, "everyone"),
    "redrive": ({"to_queue_id": "x", "limit": 5}, "limit"),
    "enqueue ": ({"messages": [{"body": BODY, "content_type": "text"}], "queue": "other"}, "queue"),
}


@pytest.mark.parametrize("route", sorted(MISSPELT))
def test_an_engine_route_refuses_a_field_it_does_not_know_and_changes_nothing(
    server: RunningServer, token: str, route: str
) -> None:
    q = server.connect("acc1").create_queue("bodies")
    body, field = MISSPELT[route]
    answer = httpx.post(
        f"{server.url}/conveyor/v1/accounts/acc1/queues/{q.id}/{route.strip()}",
        json=body,
        headers={"authorization": f"Bearer {token}"},
    )
    assert answer.status_code == 400, answer.text
    (error,) = answer.json()["errors"]
    assert error["code"] == 10207 and repr(field) in error["message"], error
    assert q.metrics().backlog_count == 0


@pytest.mark.parametrize("route", ["lease", "wake"])
def test_the_long_poll_routes_refuse_a_read_only_token_and_another_accounts(server: RunningServer, route: str) -> None:
    q = server.connect("acc1").create_queue("held")
    q.send("kept", content_type="text")
    read_only = server.tokens.create("acc1", read_only=True)[0]
    other = server.tokens.create("acc2")[0]
    body = {"max_messages": 1, "wait_ms": 1000, "waiter": "0" * 32} if route == "lease" else {"waiter": "0" * 32}
    for secret in (read_only, other):
        answer = httpx.post(
            f"{server.url}/conveyor/v1/accounts/acc1/queues/{q.id}/{route}",
            json=body,
            headers={"authorization": f"Bearer {secret}"},
        )
        assert answer.status_code == 403, answer.text
    assert q.metrics().backlog_count == 1 and q.counters().in_flight == 0
