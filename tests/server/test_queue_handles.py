"""The server's queue handles (read by the message routes, at most 0.1 s old) are dropped per queue by
the routes declared catalog writes, and by nothing else: a change made through the server applies to
the very next message request, and remote workers' leases and settles keep every handle."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx

from conveyor.server.testing import RunningServer

from .conftest import ACCOUNT

BASE = f"/client/v4/accounts/{ACCOUNT}/queues"


def _rest(server: RunningServer, token: str, method: str, path: str, body: Any = None) -> httpx.Response:
    return httpx.request(method, server.url + BASE + path, headers={"authorization": f"Bearer {token}"}, json=body)


def _queue(server: RunningServer, token: str, name: str) -> str:
    created = _rest(server, token, "POST", "", {"queue_name": name})
    assert created.status_code == 200, created.text
    queue_id = str(created.json()["result"]["queue_id"])
    assert _rest(server, token, "POST", f"/{queue_id}/consumers", {"type": "http_pull"}).status_code == 200
    return queue_id


def _pulled(server: RunningServer, token: str, queue_id: str) -> list[Any]:
    r = _rest(server, token, "POST", f"/{queue_id}/messages/pull", {"batch_size": 10})
    assert r.status_code == 200, r.text
    return [json.loads(base64.b64decode(m["body"])) for m in r.json()["result"]["messages"]]


def test_a_settings_change_through_the_server_applies_to_the_next_message_request(
    server: RunningServer, token: str
) -> None:
    queue_id = _queue(server, token, "emails")
    assert _rest(server, token, "POST", f"/{queue_id}/messages", {"body": "now"}).status_code == 200
    assert (ACCOUNT, queue_id) in server.service.handles

    assert _rest(server, token, "PATCH", f"/{queue_id}", {"settings": {"delivery_delay": 600}}).status_code == 200
    assert (ACCOUNT, queue_id) not in server.service.handles
    assert _rest(server, token, "POST", f"/{queue_id}/messages", {"body": "later"}).status_code == 200
    assert _pulled(server, token, queue_id) == ["now"]  # "later" waits for the queue's new delay

    assert _rest(server, token, "PATCH", f"/{queue_id}", {"settings": {"delivery_paused": True}}).status_code == 200
    paused = _rest(server, token, "POST", f"/{queue_id}/messages/pull", {})
    assert paused.status_code == 409 and "paused" in paused.text
    assert _rest(server, token, "PATCH", f"/{queue_id}", {"settings": {"delivery_paused": False}}).status_code == 200
    assert _pulled(server, token, queue_id) == []

    consumer_id = _rest(server, token, "GET", f"/{queue_id}/consumers").json()["result"][0]["consumer_id"]
    assert _rest(server, token, "DELETE", f"/{queue_id}/consumers/{consumer_id}").status_code == 200
    gone = _rest(server, token, "POST", f"/{queue_id}/messages/pull", {})
    assert gone.status_code == 400 and "no http_pull consumer" in gone.text


def test_leases_settles_and_another_queues_catalog_write_leave_a_queues_handle_cached(
    server: RunningServer, token: str
) -> None:
    other = _queue(server, token, "other")
    assert _rest(server, token, "POST", f"/{other}/messages", {"body": 1}).status_code == 200
    handle = server.service.handles[(ACCOUNT, other)]

    worker = server.connect(ACCOUNT)  # the remote transport: /conveyor/v1 lease, extend, settle
    queue = worker.create_queue("jobs")
    queue.add_pull_consumer()
    queue.send_batch([{"body": n} for n in range(3)])
    leased = queue.pull(batch_size=3)
    worker.engine.extend(queue.id, [m.lease_id for m in leased], 30_000)
    assert queue.ack(acks=[m.lease_id for m in leased]).ack_count == 3
    assert server.service.handles[(ACCOUNT, other)] is handle

    assert _rest(server, token, "POST", f"/{queue.id}/messages", {"body": 4}).status_code == 200
    assert (ACCOUNT, queue.id) in server.service.handles
    queue.update(delivery_delay=5)  # a catalog write of "jobs": drops its handle only
    assert (ACCOUNT, queue.id) not in server.service.handles
    assert server.service.handles[(ACCOUNT, other)] is handle
