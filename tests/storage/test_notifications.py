"""R2's event notifications: rules, the message of every kind of write, the outbox, and a worker
consuming them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import conveyor
from conveyor import tracing
from conveyor.storage import Bucket, InvalidNotificationRule, RuleNotFound
from conveyor.storage.facade import storage_of
from conveyor.storage.notifications import MAX_RULES_PER_BUCKET
from tests.storage.conftest import make_bucket
from tests.waiting import wait_for

EVENT_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def messages(cv: conveyor.Conveyor, queue: str) -> list[dict[str, Any]]:
    q = cv.queue(queue)
    bodies = [m.body for m in q.pull(batch_size=100)]
    return [json.loads(b) if isinstance(b, str | bytes) else b for b in bodies]


@pytest.fixture
def events(cv: conveyor.Conveyor) -> str:
    q = cv.create_queue("events")
    q.add_pull_consumer()
    return "events"


def test_every_kind_of_write_sends_r2s_message(cv: conveyor.Conveyor, bucket: Bucket, events: str) -> None:
    bucket.add_notification(events, actions=["object-create", "object-delete"])
    put = bucket.put("a.txt", b"hello")
    copy = bucket.copy("a.txt", "b.txt")
    bucket.delete("a.txt")
    got = messages(cv, events)
    assert [m["action"] for m in got] == ["PutObject", "CopyObject", "DeleteObject"]
    account = cv.deployment.account
    assert got[0] == {
        "account": account,
        "action": "PutObject",
        "bucket": bucket.name,
        "object": {"key": "a.txt", "size": 5, "eTag": put.etag},
        "eventTime": got[0]["eventTime"],
    }
    assert EVENT_TIME.match(got[0]["eventTime"])
    assert got[1]["object"] == {"key": "b.txt", "size": 5, "eTag": copy.etag}
    assert got[1]["copySource"] == {"bucket": bucket.name, "object": "a.txt"}
    assert got[2]["object"] == {"key": "a.txt"}  # no size or eTag for deletions
    assert "copySource" not in got[0] and "copySource" not in got[2]


def test_a_large_upload_reports_complete_multipart_upload(
    cv: conveyor.Conveyor, bucket: Bucket, events: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conveyor.storage import service

    monkeypatch.setattr(service, "MULTIPART_THRESHOLD", 1 << 20)
    bucket.add_notification(events, actions=["CompleteMultipartUpload"])
    bucket.put("small", b"x")
    bucket.put("large", b"x" * (2 << 20))
    assert [(m["action"], m["object"]["key"]) for m in messages(cv, events)] == [("CompleteMultipartUpload", "large")]


def test_rules_match_by_action_prefix_and_suffix(cv: conveyor.Conveyor, tmp_path: Path, events: str) -> None:
    b = make_bucket(cv, "local", "cdn", tmp_path, None)
    b.add_notification(events, actions=["PutObject"], prefix="libs/", suffix=".br")
    b.put("libs/a.js.br", b"1")
    b.put("libs/a.js", b"2")
    b.put("other/a.js.br", b"3")
    b.delete("libs/a.js.br")
    assert [m["object"]["key"] for m in messages(cv, events)] == ["libs/a.js.br"]


def test_rules_are_listed_and_removed(cv: conveyor.Conveyor, tmp_path: Path, events: str) -> None:
    b = make_bucket(cv, "local", "cdn", tmp_path, None)
    rule = b.add_notification(events, actions=["PutObject"], prefix="p/", description="new files")
    assert [(r.rule_id, r.queue, r.actions, r.prefix, r.description) for r in b.notifications()] == [
        (rule.rule_id, events, ("PutObject",), "p/", "new files")
    ]
    b.remove_notification(rule.rule_id)
    assert b.notifications() == []
    with pytest.raises(RuleNotFound):
        b.remove_notification(rule.rule_id)
    b.put("p/x", b"1")
    assert messages(cv, events) == []


def test_overlapping_rules_for_one_queue_are_refused(cv: conveyor.Conveyor, tmp_path: Path, events: str) -> None:
    b = make_bucket(cv, "local", "cdn", tmp_path, None)
    b.add_notification(events, actions=["PutObject"], prefix="a/")
    with pytest.raises(InvalidNotificationRule, match="overlaps"):
        b.add_notification(events, actions=["PutObject", "CopyObject"], prefix="a/b/")
    b.add_notification(events, actions=["PutObject"], prefix="b/")  # disjoint prefixes
    b.add_notification(events, actions=["DeleteObject"], prefix="a/")  # other actions
    assert len(b.notifications()) == 3


@pytest.mark.parametrize(
    ("actions", "problem"),
    [([], "at least one"), (["Nope"], "unknown"), ("PutObject", "list"), ([3], "unknown")],
)
def test_bad_rules_are_refused(cv: conveyor.Conveyor, tmp_path: Path, events: str, actions: Any, problem: str) -> None:
    b = make_bucket(cv, "local", "cdn", tmp_path, None)
    with pytest.raises(InvalidNotificationRule, match=problem):
        b.add_notification(events, actions=actions)
    assert b.notifications() == []


def test_a_rule_needs_an_existing_queue_of_the_account(cv: conveyor.Conveyor, tmp_path: Path) -> None:
    b = make_bucket(cv, "local", "cdn", tmp_path, None)
    with pytest.raises(conveyor.QueueNotFound):
        b.add_notification("no-such-queue", actions=["PutObject"])


def test_a_bucket_holds_at_most_100_rules(cv: conveyor.Conveyor, tmp_path: Path, events: str) -> None:
    b = make_bucket(cv, "local", "cdn", tmp_path, None)
    for i in range(MAX_RULES_PER_BUCKET):
        b.add_notification(events, actions=["PutObject"], prefix=f"p{i:03d}/")
    with pytest.raises(InvalidNotificationRule, match="the limit is 100"):
        b.add_notification(events, actions=["PutObject"], prefix="last/")


def test_an_unsent_notification_waits_in_the_outbox_until_the_sweep(
    cv: conveyor.Conveyor, tmp_path: Path, events: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = make_bucket(cv, "local", "cdn", tmp_path, None)
    b.add_notification(events, actions=["PutObject"])
    service = storage_of(cv)
    monkeypatch.setattr(service, "_send", lambda *args: False)  # the send after the commit fails
    b.put("k", b"v")
    monkeypatch.undo()
    assert messages(cv, events) == []
    assert service.send_pending() == 1
    assert [m["object"]["key"] for m in messages(cv, events)] == ["k"]
    assert service.send_pending() == 0


def test_a_notification_for_a_deleted_queue_is_dropped(cv: conveyor.Conveyor, tmp_path: Path, events: str) -> None:
    b = make_bucket(cv, "local", "cdn", tmp_path, None)
    b.add_notification(events, actions=["PutObject"])
    cv.delete_queue(events)
    b.put("k", b"v")  # its send fails; the sweep drops it
    service = storage_of(cv)
    assert service.send_pending() == 0
    assert service.catalog.pending_events(2**62, 10) == []


def test_a_worker_consumes_notifications(tmp_path: Path) -> None:
    cv = conveyor.connect(f"sqlite://{tmp_path / 'data'}")
    cv.create_queue("files-written")
    b = cv.create_bucket("cdn")
    b.add_notification("files-written", actions=["PutObject"], suffix=".js")
    seen: list[str] = []
    app = conveyor.App(cv)

    @app.consumer("files-written", max_batch_timeout=0.05)
    def handle(batch: conveyor.MessageBatch) -> None:
        for m in batch.messages:
            seen.append(m.body["object"]["key"])
            m.ack()

    app.start()
    try:
        b.put("lib/a.js", b"1")
        b.put("lib/a.css", b"2")
        wait_for(lambda: seen == ["lib/a.js"], what="the notification handled")
    finally:
        app.stop()
        cv.close()


def test_a_write_in_a_trace_sends_its_notification_in_that_trace(
    cv: conveyor.Conveyor, events: str, tmp_path: Path
) -> None:
    bucket = make_bucket(cv, "local", "traced", tmp_path, None)
    bucket.add_notification(events, actions=["object-create"])
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    with tracing.use(traceparent):
        bucket.put("in-trace.txt", b"1")
    bucket.put("outside.txt", b"2")
    got = {json.loads(m.body)["object"]["key"] if isinstance(m.body, str) else m.body["object"]["key"]: m.traceparent
           for m in cv.queue(events).pull(batch_size=10)}  # fmt: skip
    assert got == {"in-trace.txt": traceparent, "outside.txt": None}
