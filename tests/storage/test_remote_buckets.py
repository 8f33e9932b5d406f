"""Buckets through connect("http://..."): the same methods, carried to conveyor serve's object
routes, with the server's checks and notifications."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

import conveyor
from conveyor.server.testing import http_client


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[conveyor.Conveyor]:
    client = http_client(tmp_path / "data", account_id="acc1")
    yield client
    client.close()


def test_objects_round_trip_through_the_server(remote: conveyor.Conveyor) -> None:
    b = remote.create_bucket("cdn")
    assert [x.name for x in remote.list_buckets()] == ["cdn"]
    info = b.put("dir/é a.txt", b"hello over http", content_type="text/plain", metadata={"k": "v"})
    assert (info.key, info.size, info.content_type, dict(info.metadata)) == (
        "dir/é a.txt",
        15,
        "text/plain",
        {"k": "v"},
    )
    assert remote.bucket("cdn").head("dir/é a.txt") == info
    body = b.get("dir/é a.txt")
    assert (body.bytes(), body.info) == (b"hello over http", info)
    assert b.get("dir/é a.txt", range=(6, 10)).bytes() == b"over"
    assert b"".join(b.get("dir/é a.txt")) == b"hello over http"
    b.put("stream", io.BytesIO(b"x" * 300_000))
    assert b.head("stream").size == 300_000
    assert b.copy("stream", "copied").size == 300_000
    assert [o.key for o in b.list(prefix="")] == ["copied", "dir/é a.txt", "stream"]
    assert b.delete(["copied", "missing"]) == 1
    assert b.exists("stream") and not b.exists("copied")


def test_refusals_arrive_as_the_same_errors(remote: conveyor.Conveyor) -> None:
    with pytest.raises(conveyor.BucketNotFound):
        remote.bucket("nope")
    b = remote.create_bucket("cdn")
    with pytest.raises(conveyor.ObjectNotFound):
        b.get("missing")
    with pytest.raises(conveyor.ObjectNotFound):
        b.head("missing")
    with pytest.raises(conveyor.InvalidObjectKey):
        b.put("a\x00b", b"x")
    b.put("once", b"1", only_if_absent=True)
    with pytest.raises(conveyor.ObjectExists):
        b.put("once", b"2", only_if_absent=True)
    with pytest.raises(conveyor.BucketNotEmpty):
        remote.delete_bucket("cdn")
    with pytest.raises(conveyor.BucketExists):
        remote.create_bucket("cdn")


def test_rules_and_notifications_through_the_server(remote: conveyor.Conveyor) -> None:
    q = remote.create_queue("written")
    q.add_pull_consumer()
    b = remote.create_bucket("cdn")
    rule = b.add_notification("written", actions=["PutObject"], suffix=".js")
    assert [r.rule_id for r in b.notifications()] == [rule.rule_id]
    b.put("a.js", b"1")
    b.put("a.css", b"2")
    [message] = q.pull()
    assert (message.body["action"], message.body["object"]["key"], message.body["account"]) == (
        "PutObject",
        "a.js",
        "acc1",
    )
    b.remove_notification(rule.rule_id)
    assert b.notifications() == []
    life = b.add_lifecycle_rule(3600, prefix="tmp/")
    assert [r.rule_id for r in b.lifecycle_rules()] == [life.rule_id]
    b.remove_lifecycle_rule(life.rule_id)
    assert b.lifecycle_rules() == []
