"""REST bodies: a field the API does not have is refused by name, never ignored; the same mistake has
the Python API's code; a push says which ids its messages got."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest
from cloudflare import Cloudflare

from conveyor.server.testing import RunningServer

from .conftest import ACCOUNT

A = {"account_id": ACCOUNT}


class Api:
    """Raw requests to one account's queues, as a hand-written client sends them."""

    def __init__(self, server: RunningServer, token: str) -> None:
        self.base = f"{server.url}/client/v4/accounts/{ACCOUNT}/queues"
        self.headers = {"authorization": f"Bearer {token}"}

    def post(self, path: str, body: Any) -> httpx.Response:
        return httpx.post(self.base + path, content=json.dumps(body), headers=self.headers)

    def put(self, path: str, body: Any) -> httpx.Response:
        return httpx.put(self.base + path, content=json.dumps(body), headers=self.headers)

    def refused(self, r: httpx.Response, code: int) -> str:
        assert r.status_code == 400, r.text
        error = r.json()["errors"][0]
        assert error["code"] == code, error
        return str(error["message"])

    def queue(self, name: str = "q") -> str:
        return "/" + str(self.post("", {"queue_name": name}).json()["result"]["queue_id"])

    def backlog(self, queue: str) -> int:
        r = httpx.get(self.base + queue + "/metrics", headers=self.headers)
        return int(r.json()["result"]["backlog_count"])


@pytest.fixture
def api(server: RunningServer, token: str) -> Api:
    return Api(server, token)


def test_a_misspelt_message_field_is_refused_by_name_and_nothing_is_sent(api: Api) -> None:
    q = api.queue()
    text = api.refused(api.post(q + "/messages/batch", {"messages": [{"body": 1, "delaySeconds": 3600}]}), 10203)
    assert "message 0 of the batch has unknown field 'delaySeconds'" in text
    text = api.refused(api.post(q + "/messages", {"body": 1, "delaySeconds": 3600}), 10203)
    assert "unknown field 'delaySeconds'" in text
    assert api.backlog(q) == 0


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("", {"queue_name": "other", "setings": {}}, "setings"),
        ("", {"queue_name": "other", "settings": {"delivery_dely": 5}}, "delivery_dely"),
        ("{q}/consumers", {"type": "http_pull", "settings": {"batch_size": 5, "visibility": 9}}, "visibility"),
        ("{q}/consumers", {"type": "http_pull", "dlq": "x"}, "dlq"),
        ("{q}/messages/batch", {"messages": [{"body": 1}], "delaySeconds": 5}, "delaySeconds"),
        ("{q}/messages/pull", {"batchSize": 5}, "batchSize"),
        ("{q}/messages/ack", {"acks": [{"lease_id": "x", "retry": True}]}, "retry"),
        ("{q}/messages/ack", {"ack": []}, "ack"),
        ("{q}/messages/peek", {"batch_size": 1, "visibility_timeout_ms": 5}, "visibility_timeout_ms"),
        ("{q}/purge", {"delete_messages_permanently": True, "force": True}, "force"),
    ],
)
def test_an_unknown_field_of_a_body_is_refused_by_name(api: Api, path: str, body: Any, field: str) -> None:
    q = api.queue()
    text = api.refused(api.post(path.format(q=q), body), 10207)
    assert f"unknown field {field!r}" in text
    assert api.backlog(q) == 0


def test_a_change_of_settings_with_an_unknown_field_changes_nothing(api: Api) -> None:
    q = api.queue()
    text = api.refused(api.put(q, {"queue_name": "q", "settings": {"delivery_delay": 5, "retention": 60}}), 10207)
    assert "unknown field 'retention'" in text
    r = httpx.get(api.base + q, headers=api.headers)
    assert r.json()["result"]["settings"]["delivery_delay"] == 0


def test_a_jurisdiction_is_refused_not_ignored(api: Api) -> None:
    text = api.refused(api.post("", {"queue_name": "eu-only", "jurisdiction": "eu"}), 10207)
    assert "jurisdiction 'eu' is not supported" in text


@pytest.mark.parametrize(
    ("path", "body", "code"),
    [
        ("/messages", {"body": 1, "delay_seconds": 1.5}, 10203),
        ("/messages", {"body": 1, "delay_seconds": "soon"}, 10203),
        ("/messages/batch", {"messages": [{"body": 1, "delay_seconds": 0.5}]}, 10203),
        ("/messages/batch", {"messages": [{"body": 1}], "delay_seconds": 2.5}, 10202),
        ("/messages/batch", {"messages": [{"body": 1}], "delay_seconds": True}, 10202),
    ],
)
def test_a_bad_delay_has_the_python_apis_code(api: Api, path: str, body: Any, code: int) -> None:
    q = api.queue()
    text = api.refused(api.post(q + path, body), code)
    assert "delay_seconds is" in text and "whole number from 0 to 86400" in text
    assert api.backlog(q) == 0


def test_a_whole_float_delay_is_a_whole_number(api: Api) -> None:
    q = api.queue()
    assert api.post(q + "/messages", {"body": 1, "delay_seconds": 5.0}).status_code == 200


def test_push_answers_with_the_ids_its_messages_got(api: Api) -> None:
    q = api.queue()
    assert api.post(q + "/consumers", {"type": "http_pull"}).status_code == 200
    one = api.post(q + "/messages", {"body": {"n": 0}}).json()["result"]
    assert one["metadata"]["metrics"]["backlog_count"] == 1  # Cloudflare's shape is kept
    many = api.post(q + "/messages/batch", {"messages": [{"body": {"n": n}} for n in (1, 2)]}).json()["result"]
    pulled = api.post(q + "/messages/pull", {"batch_size": 10}).json()["result"]["messages"]
    by_id = {m["id"]: json.loads(base64.b64decode(m["body"])) for m in pulled}
    assert [by_id[i]["n"] for i in one["message_ids"] + many["message_ids"]] == [0, 1, 2]


def test_the_sdk_still_reads_a_push_answer(cf: Cloudflare) -> None:
    qid = cf.queues.create(queue_name="emails", **A).queue_id or ""  # type: ignore[union-attr]
    pushed = cf.queues.messages.push(qid, body={"n": 1}, **A)
    assert pushed is not None and pushed.metadata is not None and pushed.metadata.metrics is not None
    assert pushed.metadata.metrics.backlog_count == 1


@pytest.mark.parametrize("script", ["not a script", ".x:y", "x:", ":y", "a b:c", "x:y z", "Mailer", "a" * 300])
def test_a_worker_consumer_with_a_script_that_names_nothing_is_refused(api: Api, script: str) -> None:
    q = api.queue()
    text = api.refused(api.post(q + "/consumers", {"type": "worker", "script_name": script}), 10207)
    assert "invalid script_name" in text and "module:function" in text
    assert httpx.get(api.base + q + "/consumers", headers=api.headers).json()["result"] == []


@pytest.mark.parametrize("script", ["myapp.consumers:handle", "app:Handlers.on_batch", "my-worker", "mailer"])
def test_a_handler_or_a_wrangler_worker_name_is_accepted(api: Api, script: str) -> None:
    q = api.queue()
    r = api.post(q + "/consumers", {"type": "worker", "script_name": script, "environment_name": ""})
    assert r.status_code == 200, r.text
    assert r.json()["result"]["script_name"] == script


def test_a_pushed_json_body_is_stored_as_its_compact_text(api: Api) -> None:
    q = api.queue()
    raw = b'{"messages": [{"body": {"a": 1,  "b": [1, 2.50], "s": "x y"}}, {"body": "t", "content_type": "text"}]}'
    r = httpx.post(api.base + q + "/messages/batch", content=raw, headers=api.headers)
    assert r.status_code == 200, r.text
    compact = b'{"a":1,"b":[1,2.50],"s":"x y"}'
    assert api.backlog(q) == 2
    metrics = httpx.get(api.base + q + "/metrics", headers=api.headers).json()["result"]
    assert metrics["backlog_bytes"] == len(compact) + 1
    peeked = api.post(q + "/messages/peek", {"batch_size": 2}).json()["result"]["messages"]
    assert sorted(m["body"] for m in peeked) == sorted([base64.b64encode(compact).decode(), "t"])
