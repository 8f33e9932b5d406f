"""Every Queues method of Cloudflare's official Python SDK, against the server."""

from __future__ import annotations

import base64
import json

import cloudflare
import pytest
from cloudflare import Cloudflare

from .conftest import ACCOUNT

A = {"account_id": ACCOUNT}


def test_queue_lifecycle_create_get_list_update_edit_delete(cf: Cloudflare) -> None:
    created = cf.queues.create(queue_name="emails", **A)
    assert created is not None and created.queue_name == "emails" and len(created.queue_id or "") == 32
    assert created.settings is not None and created.settings.message_retention_period == 345600
    qid = created.queue_id or ""

    fetched = cf.queues.get(qid, **A)
    assert fetched is not None and fetched.queue_name == "emails" and fetched.consumers == []

    updated = cf.queues.update(qid, queue_name="emails", settings={"delivery_delay": 5}, **A)
    assert updated is not None and updated.settings is not None
    assert updated.settings.delivery_delay == 5 and updated.settings.message_retention_period == 345600

    edited = cf.queues.edit(qid, settings={"delivery_paused": True}, **A)
    assert edited is not None and edited.settings is not None
    assert edited.settings.delivery_paused is True and edited.settings.delivery_delay == 5

    assert [q.queue_name for q in cf.queues.list(**A)] == ["emails"]
    cf.queues.delete(qid, **A)
    assert list(cf.queues.list(**A)) == []
    with pytest.raises(cloudflare.NotFoundError) as info:
        cf.queues.get(qid, **A)
    assert info.value.body["errors"][0]["code"] == 10104  # type: ignore[index]


def test_create_with_taken_name_is_a_conflict(cf: Cloudflare) -> None:
    cf.queues.create(queue_name="emails", **A)
    with pytest.raises(cloudflare.ConflictError) as info:
        cf.queues.create(queue_name="emails", **A)
    # The SDK would retry a 409 by itself unless told not to.
    assert info.value.response.headers["x-should-retry"] == "false"


def test_invalid_queue_name_is_11003(cf: Cloudflare) -> None:
    with pytest.raises(cloudflare.BadRequestError) as info:
        cf.queues.create(queue_name="Bad_Name", **A)
    assert info.value.body["errors"][0]["code"] == 11003  # type: ignore[index]


def test_push_bulk_push_and_metrics(cf: Cloudflare) -> None:
    qid = cf.queues.create(queue_name="emails", **A).queue_id or ""  # type: ignore[union-attr]
    pushed = cf.queues.messages.push(qid, body={"n": 1}, **A)
    assert pushed is not None and pushed.metadata is not None and pushed.metadata.metrics is not None
    assert pushed.metadata.metrics.backlog_count == 1
    cf.queues.messages.bulk_push(
        qid,
        messages=[{"body": "hello", "content_type": "text"}, {"body": [1, 2], "content_type": "json"}],
        **A,
    )
    metrics = cf.queues.get_metrics(qid, **A)
    assert metrics is not None and metrics.backlog_count == 3 and metrics.oldest_message_timestamp_ms > 0


def test_pull_ack_retry_and_peek_with_cloudflare_encodings(cf: Cloudflare) -> None:
    qid = cf.queues.create(queue_name="jobs", **A).queue_id or ""  # type: ignore[union-attr]
    consumer = cf.queues.consumers.create(qid, type="http_pull", settings={"batch_size": 10}, **A)
    assert consumer is not None and consumer.type == "http_pull"
    cf.queues.messages.bulk_push(
        qid, messages=[{"body": {"k": "v"}, "content_type": "json"}, {"body": "plain", "content_type": "text"}], **A
    )

    peeked = cf.queues.messages.peek(qid, batch_size=10, **A)
    assert peeked is not None and len(peeked.messages or []) == 2

    pulled = cf.queues.messages.pull(qid, batch_size=10, visibility_timeout_ms=60000, **A)
    assert pulled is not None and pulled.messages is not None and len(pulled.messages) == 2
    by_type = {m.metadata["CF-Content-Type"]: m for m in pulled.messages}  # type: ignore[index]
    assert json.loads(base64.b64decode(by_type["json"].body or "")) == {"k": "v"}
    assert by_type["text"].body == "plain"
    assert all(m.attempts == 1 and m.lease_id for m in pulled.messages)

    acked = cf.queues.messages.ack(
        qid,
        acks=[{"lease_id": by_type["json"].lease_id or ""}],
        retries=[{"lease_id": by_type["text"].lease_id or "", "delay_seconds": 0}],
        **A,
    )
    assert acked is not None and acked.ack_count == 1 and acked.retry_count == 1 and acked.warnings == {}

    again = cf.queues.messages.pull(qid, batch_size=10, **A)
    assert again is not None and [m.attempts for m in again.messages or []] == [2]


def test_pull_on_paused_queue_is_409_queue_delivery_paused(cf: Cloudflare) -> None:
    qid = cf.queues.create(queue_name="jobs", **A).queue_id or ""  # type: ignore[union-attr]
    cf.queues.consumers.create(qid, type="http_pull", **A)
    cf.queues.edit(qid, settings={"delivery_paused": True}, **A)
    with pytest.raises(cloudflare.ConflictError) as info:
        cf.queues.messages.pull(qid, **A)
    assert "queue_delivery_paused" in info.value.body["errors"][0]["message"]  # type: ignore[index]


def test_purge_start_and_status(cf: Cloudflare) -> None:
    qid = cf.queues.create(queue_name="jobs", **A).queue_id or ""  # type: ignore[union-attr]
    cf.queues.messages.bulk_push(qid, messages=[{"body": i} for i in range(5)], **A)
    purged = cf.queues.purge.start(qid, delete_messages_permanently=True, **A)
    assert purged is not None and purged.queue_id == qid
    status = cf.queues.purge.status(qid, **A)
    assert status is not None and status.completed and status.started_at
    assert cf.queues.get_metrics(qid, **A).backlog_count == 0  # type: ignore[union-attr]


def test_purge_without_permanent_flag_is_refused(cf: Cloudflare) -> None:
    qid = cf.queues.create(queue_name="jobs", **A).queue_id or ""  # type: ignore[union-attr]
    with pytest.raises(cloudflare.BadRequestError):
        cf.queues.purge.start(qid, **A)


def test_consumer_create_list_get_update_delete(cf: Cloudflare) -> None:
    qid = cf.queues.create(queue_name="jobs", **A).queue_id or ""  # type: ignore[union-attr]
    created = cf.queues.consumers.create(
        qid,
        type="worker",
        script_name="app:handle",
        dead_letter_queue="jobs-dlq",
        settings={"batch_size": 20, "max_retries": 5, "max_wait_time_ms": 2000},
        **A,
    )
    assert created is not None and created.type == "worker"
    assert created.script_name == "app:handle" and created.dead_letter_queue == "jobs-dlq"
    cid = created.consumer_id or ""

    assert [c.consumer_id for c in cf.queues.consumers.list(qid, **A)] == [cid]
    got = cf.queues.consumers.get(cid, queue_id=qid, **A)
    assert got is not None and got.settings is not None and got.settings.batch_size == 20

    updated = cf.queues.consumers.update(
        cid, queue_id=qid, type="worker", script_name="app:handle", settings={"batch_size": 50}, **A
    )
    assert updated is not None and updated.settings is not None and updated.settings.batch_size == 50

    with pytest.raises(cloudflare.ConflictError) as info:
        cf.queues.consumers.create(qid, type="http_pull", **A)
    assert info.value.body["errors"][0]["code"] == 11004  # type: ignore[index]

    cf.queues.consumers.delete(cid, queue_id=qid, **A)
    assert list(cf.queues.consumers.list(qid, **A)) == []
    with pytest.raises(cloudflare.NotFoundError):
        cf.queues.consumers.get(cid, queue_id=qid, **A)


def test_list_pages_and_filters_by_name(cf: Cloudflare) -> None:
    for i in range(5):
        cf.queues.create(queue_name=f"q{i}", **A)
    page = cf.queues.with_raw_response.list(**A, extra_query={"page": 2, "per_page": 2}).parse()
    assert [q.queue_name for q in page] == ["q2", "q3"]
    raw = cf.get(f"/accounts/{ACCOUNT}/queues", cast_to=object, options={"params": {"page": 3, "per_page": 2}})
    assert raw["result_info"] == {"page": 3, "per_page": 2, "count": 1, "total_count": 5, "total_pages": 3}  # type: ignore[index]
    named = cf.get(f"/accounts/{ACCOUNT}/queues", cast_to=object, options={"params": {"name": "q4"}})
    assert [q["queue_name"] for q in named["result"]] == ["q4"]  # type: ignore[index]


def test_message_errors_carry_cloudflare_codes(cf: Cloudflare) -> None:
    qid = cf.queues.create(queue_name="jobs", **A).queue_id or ""  # type: ignore[union-attr]
    cases = [
        ({"body": "x" * 128_001, "content_type": "text"}, 413, 10204),
        ({"body": "x", "content_type": "v8"}, 400, 10203),
        ({"body": "x", "content_type": "json", "delay_seconds": 86_401}, 400, 10203),
    ]
    for body, status, code in cases:
        with pytest.raises(cloudflare.APIStatusError) as info:
            cf.queues.messages.push(qid, **body, **A)  # type: ignore[arg-type]
        assert info.value.status_code == status
        assert info.value.body["errors"][0]["code"] == code  # type: ignore[index]
    with pytest.raises(cloudflare.BadRequestError) as batch:
        cf.queues.messages.bulk_push(qid, messages=[{"body": i} for i in range(101)], **A)
    assert batch.value.body["errors"][0]["code"] == 10206  # type: ignore[index]
    with pytest.raises(cloudflare.APIStatusError) as big:
        cf.queues.messages.bulk_push(qid, messages=[{"body": "x" * 100_000, "content_type": "text"}] * 3, **A)
    assert big.value.body["errors"][0]["code"] == 10205  # type: ignore[index]
    with pytest.raises(cloudflare.BadRequestError) as delay:
        cf.queues.messages.bulk_push(qid, messages=[{"body": 1}], delay_seconds=90_000, **A)
    assert delay.value.body["errors"][0]["code"] == 10202  # type: ignore[index]


def test_malformed_queue_id_is_10107(cf: Cloudflare) -> None:
    with pytest.raises(cloudflare.BadRequestError) as info:
        cf.queues.get("not-an-id", **A)
    assert info.value.body["errors"][0]["code"] == 10107  # type: ignore[index]
