"""R2's bucket management and event-notification configuration through Cloudflare's own SDK."""

from __future__ import annotations

from collections.abc import Iterator

import cloudflare
import httpx
import pytest
from cloudflare import Cloudflare

from conveyor.server.testing import RunningServer
from tests.server.conftest import ACCOUNT, sdk
from tests.storage.s3_server import S3Server, start_s3_server


def test_buckets_are_created_listed_got_and_deleted(cf: Cloudflare) -> None:
    made = cf.r2.buckets.create(account_id=ACCOUNT, name="cdn")
    assert made.name == "cdn" and made.creation_date and made.storage_class == "Standard"
    cf.r2.buckets.create(account_id=ACCOUNT, name="assets")
    listed = cf.r2.buckets.list(account_id=ACCOUNT)
    assert [b.name for b in listed.buckets or []] == ["assets", "cdn"]
    assert [b.name for b in cf.r2.buckets.list(account_id=ACCOUNT, start_after="assets").buckets or []] == ["cdn"]
    assert [b.name for b in cf.r2.buckets.list(account_id=ACCOUNT, name_contains="ss").buckets or []] == ["assets"]
    assert cf.r2.buckets.get("cdn", account_id=ACCOUNT).name == "cdn"
    cf.r2.buckets.delete("cdn", account_id=ACCOUNT)
    with pytest.raises(cloudflare.NotFoundError):
        cf.r2.buckets.get("cdn", account_id=ACCOUNT)


def test_bad_bucket_requests_are_refused(cf: Cloudflare) -> None:
    with pytest.raises(cloudflare.BadRequestError, match="3 to 63"):
        cf.r2.buckets.create(account_id=ACCOUNT, name="Bad_Name")
    with pytest.raises(cloudflare.BadRequestError, match="jurisdiction"):
        cf.r2.buckets.create(account_id=ACCOUNT, name="eu-bucket", cf_r2_jurisdiction="eu")
    cf.r2.buckets.create(account_id=ACCOUNT, name="twice")
    with pytest.raises(cloudflare.ConflictError):
        cf.r2.buckets.create(account_id=ACCOUNT, name="twice")
    assert [b.name for b in cf.r2.buckets.list(account_id=ACCOUNT).buckets or []] == ["twice"]


def test_a_non_empty_bucket_is_not_deleted(cf: Cloudflare, server: RunningServer) -> None:
    cf.r2.buckets.create(account_id=ACCOUNT, name="full")
    server.service.client(ACCOUNT).bucket("full").put("k", b"v")
    with pytest.raises(cloudflare.ConflictError, match="not empty"):
        cf.r2.buckets.delete("full", account_id=ACCOUNT)


def test_notification_rules_are_configured_read_and_removed(cf: Cloudflare) -> None:
    cf.r2.buckets.create(account_id=ACCOUNT, name="cdn")
    queue = cf.queues.create(account_id=ACCOUNT, queue_name="written")
    assert queue.queue_id is not None
    cf.r2.buckets.event_notifications.update(
        queue.queue_id,
        account_id=ACCOUNT,
        bucket_name="cdn",
        rules=[
            {"actions": ["PutObject", "CopyObject"], "prefix": "js/", "suffix": ".js", "description": "scripts"},
            {"actions": ["DeleteObject"]},
        ],
    )
    got = cf.r2.buckets.event_notifications.get(queue.queue_id, account_id=ACCOUNT, bucket_name="cdn")
    assert (got.queue_id, got.queue_name) == (queue.queue_id, "written")
    assert [(r.actions, r.prefix, r.suffix, r.description) for r in got.rules or []] == [
        (["PutObject", "CopyObject"], "js/", ".js", "scripts"),
        (["DeleteObject"], "", "", ""),
    ]
    listed = cf.r2.buckets.event_notifications.list(account_id=ACCOUNT, bucket_name="cdn")
    assert listed.bucket_name == "cdn"
    assert [(q.queue_name, len(q.rules or [])) for q in listed.queues or []] == [("written", 2)]
    cf.r2.buckets.event_notifications.delete(queue.queue_id, account_id=ACCOUNT, bucket_name="cdn")
    after = cf.r2.buckets.event_notifications.get(queue.queue_id, account_id=ACCOUNT, bucket_name="cdn")
    assert after.rules == []


def test_a_configured_rule_sends_r2s_message(cf: Cloudflare, server: RunningServer) -> None:
    cf.r2.buckets.create(account_id=ACCOUNT, name="cdn")
    queue = cf.queues.create(account_id=ACCOUNT, queue_name="written")
    assert queue.queue_id is not None
    cf.r2.buckets.event_notifications.update(
        queue.queue_id, account_id=ACCOUNT, bucket_name="cdn", rules=[{"actions": ["PutObject"]}]
    )
    cv = server.service.client(ACCOUNT)
    cv.bucket("cdn").put("a.js", b"x")
    cv.queue("written").add_pull_consumer()
    [message] = cv.queue("written").pull()
    assert message.body["action"] == "PutObject" and message.body["account"] == ACCOUNT


def test_a_bad_rule_and_an_unknown_queue_are_refused(cf: Cloudflare) -> None:
    cf.r2.buckets.create(account_id=ACCOUNT, name="cdn")
    queue = cf.queues.create(account_id=ACCOUNT, queue_name="written")
    assert queue.queue_id is not None
    with pytest.raises(cloudflare.BadRequestError):
        cf.r2.buckets.event_notifications.update(
            queue.queue_id,
            account_id=ACCOUNT,
            bucket_name="cdn",
            rules=[{"actions": ["Nope"]}],  # type: ignore[list-item]
        )
    with pytest.raises(cloudflare.NotFoundError):
        cf.r2.buckets.event_notifications.update(
            "0" * 32, account_id=ACCOUNT, bucket_name="cdn", rules=[{"actions": ["PutObject"]}]
        )
    with pytest.raises(cloudflare.NotFoundError):
        cf.r2.buckets.event_notifications.update(
            queue.queue_id, account_id=ACCOUNT, bucket_name="missing", rules=[{"actions": ["PutObject"]}]
        )


def test_another_accounts_token_reaches_no_bucket(cf: Cloudflare, server: RunningServer) -> None:
    cf.r2.buckets.create(account_id=ACCOUNT, name="mine")
    other = sdk(server, server.tokens.create("acc2")[0])
    with pytest.raises(cloudflare.PermissionDeniedError):
        other.r2.buckets.list(account_id=ACCOUNT)
    assert other.r2.buckets.list(account_id="acc2").buckets == []
    other.close()


def test_read_only_and_queue_scoped_tokens_are_refused_writes(server: RunningServer) -> None:
    reader = sdk(server, server.tokens.create(ACCOUNT, read_only=True)[0])
    with pytest.raises(cloudflare.PermissionDeniedError):
        reader.r2.buckets.create(account_id=ACCOUNT, name="nope")
    assert reader.r2.buckets.list(account_id=ACCOUNT).buckets == []
    scoped = sdk(server, server.tokens.create(ACCOUNT, queues=("q",))[0])
    with pytest.raises(cloudflare.PermissionDeniedError):
        scoped.r2.buckets.list(account_id=ACCOUNT)
    reader.close()
    scoped.close()


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    running = start_s3_server(tmp_path_factory.mktemp("moto"))
    yield running
    running.stop()


def test_an_s3_bucket_through_the_server_passes_the_egress_policy(
    server: RunningServer, token: str, monkeypatch: pytest.MonkeyPatch, s3_server: S3Server
) -> None:
    body = {
        "name": "mirror",
        "url": f"s3://{s3_server.new_bucket()}/p",
        "endpoint": s3_server.endpoint,
        "region": "us-east-1",
        "access_key_id": s3_server.access_key_id,
        "secret_access_key": s3_server.secret_access_key,
    }
    url = f"{server.url}/conveyor/v1/accounts/{ACCOUNT}/buckets"
    headers = {"Authorization": f"Bearer {token}"}
    monkeypatch.delenv("CONVEYOR_EGRESS_ALLOW", raising=False)
    refused = httpx.post(url, json=body, headers=headers)
    assert refused.status_code == 403 and "loopback" in refused.text
    assert s3_server.secret_access_key not in refused.text
    assert httpx.get(url, headers=headers).json()["result"] == []
    monkeypatch.setenv("CONVEYOR_EGRESS_ALLOW", "127.0.0.1")
    made = httpx.post(url, json=body, headers=headers)
    assert made.status_code == 200, made.text
    assert made.json()["result"]["location"] == "s3"
    assert s3_server.secret_access_key not in made.text
    listed = httpx.get(url, headers=headers).text
    assert "mirror" in listed and s3_server.secret_access_key not in listed


def test_a_tenant_cannot_name_an_unshared_directory(server: RunningServer, token: str) -> None:
    url = f"{server.url}/conveyor/v1/accounts/{ACCOUNT}/buckets"
    answer = httpx.post(url, json={"name": "etc", "url": "file:///etc"}, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 400 and "not declared shared" in answer.text
