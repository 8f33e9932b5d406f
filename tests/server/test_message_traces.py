"""A message's traceparent over Cloudflare's wire: a send's W3C ``traceparent`` header goes with
every message of it, a pull shows it as ``metadata.traceparent`` beside an unchanged
``CF-Content-Type`` (so Cloudflare's clients still read the body), a malformed one is refused
(10203) with nothing stored; a remote client's send and pull carry it end to end."""

from __future__ import annotations

from typing import Any

import httpx
from cloudflare import Cloudflare

from conveyor import tracing
from conveyor.server.testing import RunningServer

from .conftest import ACCOUNT

BASE = f"/client/v4/accounts/{ACCOUNT}/queues"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _rest(server: RunningServer, token: str, method: str, path: str, body: Any = None, **headers: str) -> Any:
    return httpx.request(
        method, server.url + BASE + path, headers={"authorization": f"Bearer {token}", **headers}, json=body
    )


def test_a_send_header_traceparent_is_pulled_as_metadata(server: RunningServer, token: str, cf: Cloudflare) -> None:
    queue_id = _rest(server, token, "POST", "", {"queue_name": "traced"}).json()["result"]["queue_id"]
    assert _rest(server, token, "POST", f"/{queue_id}/consumers", {"type": "http_pull"}).status_code == 200
    one = _rest(server, token, "POST", f"/{queue_id}/messages", {"body": {"n": 1}}, traceparent=TRACEPARENT)
    assert one.status_code == 200, one.text
    batch = {"messages": [{"body": {"n": 2}}, {"body": "x", "content_type": "text"}]}
    assert (
        _rest(server, token, "POST", f"/{queue_id}/messages/batch", batch, traceparent=TRACEPARENT).status_code == 200
    )
    assert _rest(server, token, "POST", f"/{queue_id}/messages", {"body": {"n": 3}}).status_code == 200
    bad = _rest(server, token, "POST", f"/{queue_id}/messages", {"body": {"n": 4}}, traceparent="00-zz")
    assert bad.status_code == 400 and "W3C traceparent" in bad.text and "10203" in bad.text

    pulled = _rest(server, token, "POST", f"/{queue_id}/messages/pull", {"batch_size": 10}).json()["result"]
    metadata = [m["metadata"] for m in pulled["messages"]]
    assert metadata == [
        {"CF-Content-Type": "json", "traceparent": TRACEPARENT},
        {"CF-Content-Type": "json", "traceparent": TRACEPARENT},
        {"CF-Content-Type": "text", "traceparent": TRACEPARENT},
        {"CF-Content-Type": "json"},
    ]
    # Cloudflare's SDK reads such a message as any other (its metadata is a free-form object).
    assert (
        _rest(server, token, "POST", f"/{queue_id}/messages", {"body": 5}, traceparent=TRACEPARENT).status_code == 200
    )
    page = cf.queues.messages.pull(queue_id, account_id=ACCOUNT, batch_size=10)
    assert page is not None and page.messages is not None
    (message,) = page.messages
    assert message.metadata == {"CF-Content-Type": "json", "traceparent": TRACEPARENT}


def test_a_remote_client_carries_the_traceparent_end_to_end(server: RunningServer) -> None:
    cv = server.connect(ACCOUNT)
    try:
        q = cv.create_queue("remote")
        q.add_pull_consumer()
        with tracing.use(TRACEPARENT):
            q.send({"n": 1})
            q.send_batch([{"body": {"n": 2}}])
        q.send({"n": 3})
        assert [m.traceparent for m in q.pull(batch_size=10)] == [TRACEPARENT, TRACEPARENT, None]
    finally:
        cv.close()


def test_a_remote_write_in_a_trace_sends_its_notification_in_that_trace(server: RunningServer) -> None:
    cv = server.connect(ACCOUNT)
    try:
        events = cv.create_queue("events")
        events.add_pull_consumer()
        bucket = cv.create_bucket("traced")
        bucket.add_notification("events", actions=["object-create"])
        with tracing.use(TRACEPARENT):
            bucket.put("in-trace.txt", b"1")
        bucket.put("outside.txt", b"2")
        assert [m.traceparent for m in events.pull(batch_size=10)] == [TRACEPARENT, None]
    finally:
        cv.close()
