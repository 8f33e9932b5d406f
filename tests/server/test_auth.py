"""Tokens: 401 without a good one, scopes, and accounts that never see each other's queues."""

from __future__ import annotations

import httpx
import pytest

import conveyor
from conveyor.server.serve import is_loopback, serve
from conveyor.server.testing import RunningServer
from conveyor.server.token_tables import SqliteTokens
from conveyor.server.tokens import hash_secret

from .conftest import ACCOUNT


def _call(server: RunningServer, method: str, path: str, token: str | None, **kw: object) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token is not None else {}
    return httpx.request(method, server.url + path, headers=headers, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("header", [None, "Bearer", "Bearer cvt_not-a-real-token", "Basic abc"])
def test_missing_or_bad_token_is_401_code_10106(server: RunningServer, header: str | None) -> None:
    headers = {} if header is None else {"authorization": header}
    r = httpx.get(f"{server.url}/client/v4/accounts/{ACCOUNT}/queues", headers=headers)
    assert r.status_code == 401
    body = r.json()
    assert body["success"] is False and body["errors"][0]["code"] == 10106 and body["result"] is None


def test_tokens_are_stored_hashed(server: RunningServer) -> None:
    secret, _ = server.tokens.create(ACCOUNT)
    assert isinstance(server.tokens.table, SqliteTokens)
    catalog = server.tokens.table.path
    stored = b"".join(f.read_bytes() for f in catalog.parent.glob(catalog.name + "*"))
    assert hash_secret(secret).encode() in stored and secret.encode() not in stored


def test_revoked_token_is_refused(server: RunningServer) -> None:
    secret, token = server.tokens.create(ACCOUNT)
    assert server.tokens.revoke(token.token_id)
    server.service.auth._cache.clear()
    assert _call(server, "GET", f"/client/v4/accounts/{ACCOUNT}/queues", secret).status_code == 401


def test_accounts_never_see_each_others_queues(server: RunningServer) -> None:
    alice = server.connect("alice")
    bob = server.connect("bob")
    secret_bob, _ = server.tokens.create("bob")
    q = alice.create_queue("emails")
    q.send({"secret": 1})
    alice_q = alice.queue("emails")
    alice_q.add_pull_consumer()

    # Bob sees no queue of Alice's, by name or by id, and may have his own "emails".
    assert bob.list_queues() == []
    with pytest.raises(conveyor.QueueNotFound):
        bob.queue("emails")
    with pytest.raises(conveyor.QueueNotFound):
        bob.queue_by_id(q.id)
    base = f"/client/v4/accounts/bob/queues/{q.id}"
    for method, path, body in [
        ("GET", "", None),
        ("GET", "/metrics", None),
        ("POST", "/messages", {"body": 1}),
        ("POST", "/messages/pull", {}),
        ("POST", "/messages/peek", {}),
        ("POST", "/purge", {"delete_messages_permanently": True}),
        ("DELETE", "", None),
    ]:
        r = _call(server, method, base + path, secret_bob, json=body)
        assert r.status_code == 404, (method, path, r.text)
        assert r.json()["errors"][0]["code"] == 10104
    r = _call(server, "POST", f"/conveyor/v1/accounts/bob/queues/{q.id}/lease", secret_bob, json={})
    assert r.status_code == 404
    bob.create_queue("emails")
    assert alice.queue("emails").metrics().backlog_count == 1

    # Bob's token is not valid on Alice's account at all.
    r = _call(server, "GET", "/client/v4/accounts/alice/queues", secret_bob)
    assert r.status_code == 403


def test_read_only_token_reads_and_peeks_but_cannot_write(server: RunningServer) -> None:
    writer = server.connect(ACCOUNT)
    q = writer.create_queue("emails")
    q.send("x", content_type="text")
    secret, _ = server.tokens.create(ACCOUNT, read_only=True)
    base = f"/client/v4/accounts/{ACCOUNT}/queues"
    assert _call(server, "GET", base, secret).status_code == 200
    assert _call(server, "GET", f"{base}/{q.id}/metrics", secret).status_code == 200
    assert _call(server, "POST", f"{base}/{q.id}/messages/peek", secret, json={}).status_code == 200
    for method, path, body in [
        ("POST", "", {"queue_name": "other"}),
        ("POST", f"/{q.id}/messages", {"body": 1}),
        ("POST", f"/{q.id}/purge", {"delete_messages_permanently": True}),
        ("DELETE", f"/{q.id}", None),
    ]:
        assert _call(server, method, base + path, secret, json=body).status_code == 403
    assert q.metrics().backlog_count == 1


def test_queue_scoped_token_sees_only_its_queues(server: RunningServer) -> None:
    admin = server.connect(ACCOUNT)
    admin.create_queue("emails")
    hidden = admin.create_queue("billing")
    scoped = server.connect(ACCOUNT, queues=("emails",))
    assert [q.queue_name for q in scoped.list_queues()] == ["emails"]
    scoped.queue("emails").send({"ok": True})
    with pytest.raises(conveyor.QueueNotFound):
        scoped.queue_by_id(hidden.id)
    with pytest.raises(conveyor.Forbidden):
        scoped.create_queue("other")


def test_no_auth_is_refused_off_loopback() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0")
    with pytest.raises(SystemExit, match="loopback"):
        serve("sqlite:///nonexistent-never-created", host="0.0.0.0", no_auth=True)


def test_remote_client_with_a_bad_token_raises_unauthorized(server: RunningServer) -> None:
    with (
        conveyor.connect(server.url, token="cvt_wrong", account_id=ACCOUNT) as cv,
        pytest.raises(conveyor.Unauthorized) as info,
    ):
        cv.list_queues()
    assert info.value.code == 10106


def test_remote_client_needs_an_account_id(server: RunningServer) -> None:
    with pytest.raises(conveyor.InvalidRequest, match="account_id"):
        conveyor.connect(server.url, token="cvt_x", account_id="")
