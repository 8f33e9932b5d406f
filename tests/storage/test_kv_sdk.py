"""Every ``kv.namespaces.*`` method of Cloudflare's official Python SDK against ``conveyor serve``,
and the routes' access rules (read-only tokens read, other accounts and queue-scoped tokens refused)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import cloudflare
import httpx
import pytest
from cloudflare import Cloudflare

import conveyor
from conveyor.server.testing import RunningServer, running_server

ACCOUNT = "acc1"
A = {"account_id": ACCOUNT}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningServer]:
    with running_server(f"sqlite://{tmp_path / 'data'}") as running:
        yield running


def sdk(server: RunningServer, account: str = ACCOUNT, **scope: object) -> Cloudflare:
    secret = server.tokens.create(account, **scope)[0]  # type: ignore[arg-type]
    return Cloudflare(api_token=secret, base_url=server.url + "/client/v4", max_retries=0)


@pytest.fixture
def cf(server: RunningServer) -> Iterator[Cloudflare]:
    client = sdk(server)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def ns(cf: Cloudflare) -> str:
    created = cf.kv.namespaces.create(title="cdn-meta", **A)
    assert created is not None
    return created.id


def code(exc: cloudflare.APIStatusError) -> int:
    return int(exc.body["errors"][0]["code"])  # type: ignore[index]


def test_namespace_lifecycle(cf: Cloudflare) -> None:
    created = cf.kv.namespaces.create(title="b", **A)
    assert created is not None and len(created.id) == 32 and created.title == "b"
    cf.kv.namespaces.create(title="a", **A)
    assert [n.title for n in cf.kv.namespaces.list(**A)] == ["a", "b"]
    assert [n.title for n in cf.kv.namespaces.list(direction="desc", **A)] == ["b", "a"]
    page = cf.kv.namespaces.list(per_page=1, **A)
    assert [n.title for n in page.result] == ["a"]
    assert [n.title for n in cf.kv.namespaces.list(per_page=1, **A)] == ["a", "b"]
    fetched = cf.kv.namespaces.get(created.id, **A)
    assert fetched is not None and fetched.title == "b"
    renamed = cf.kv.namespaces.update(created.id, title="c", **A)
    assert renamed.title == "c"
    cf.kv.namespaces.delete(created.id, **A)
    with pytest.raises(cloudflare.NotFoundError) as caught:
        cf.kv.namespaces.get(created.id, **A)
    assert code(caught.value) == 10013


def test_a_taken_title_is_10014(cf: Cloudflare, ns: str) -> None:
    with pytest.raises(cloudflare.BadRequestError) as caught:
        cf.kv.namespaces.create(title="cdn-meta", **A)
    assert code(caught.value) == 10014


def test_values_with_metadata_and_expiration(cf: Cloudflare, ns: str) -> None:
    values = cf.kv.namespaces.values
    values.update("jquery/3.7.1", namespace_id=ns, value=b"min.js", metadata={"sri": "sha384-x"}, **A)
    values.update("ttl", namespace_id=ns, value=b"v", expiration_ttl=3600, **A)
    got = values.get("jquery/3.7.1", namespace_id=ns, **A)
    assert got.read() == b"min.js"
    assert cf.kv.namespaces.metadata.get("jquery/3.7.1", namespace_id=ns, **A) == {"sri": "sha384-x"}
    keys = list(cf.kv.namespaces.keys.list(ns, **A))
    assert [k.name for k in keys] == ["jquery/3.7.1", "ttl"]
    assert keys[0].metadata == {"sri": "sha384-x"} and keys[0].expiration is None
    assert keys[1].expiration is not None and keys[1].metadata is None
    assert values.get("ttl", namespace_id=ns, **A).headers["expiration"] == str(int(keys[1].expiration))
    values.delete("ttl", namespace_id=ns, **A)
    with pytest.raises(cloudflare.NotFoundError) as caught:
        values.get("ttl", namespace_id=ns, **A)
    assert code(caught.value) == 10009


def test_a_binary_value_as_a_file(cf: Cloudflare, ns: str) -> None:
    cf.kv.namespaces.values.update("logo", namespace_id=ns, value=("logo.png", b"\x89PNG\x00\xff"), **A)
    assert cf.kv.namespaces.values.get("logo", namespace_id=ns, **A).read() == b"\x89PNG\x00\xff"


def test_keys_list_pages_by_cursor(cf: Cloudflare, ns: str) -> None:
    cf.kv.namespaces.bulk_update(ns, body=[{"key": f"k{i:02}", "value": str(i)} for i in range(25)], **A)
    first = cf.kv.namespaces.keys.list(ns, limit=10, **A)
    assert len(first.result) == 10 and first.result_info is not None and first.result_info.cursor
    assert [k.name for k in cf.kv.namespaces.keys.list(ns, limit=10, **A)] == [f"k{i:02}" for i in range(25)]
    assert [k.name for k in cf.kv.namespaces.keys.list(ns, prefix="k2", **A)] == [f"k{i}" for i in range(20, 25)]


def test_bulk_write_get_and_delete(cf: Cloudflare, ns: str) -> None:
    written = cf.kv.namespaces.bulk_update(
        ns,
        body=[
            {"key": "text", "value": "hello", "metadata": {"m": 1}},
            {"key": "json", "value": json.dumps({"a": 1})},
            {"key": "bin", "value": base64.b64encode(b"\x00\x01").decode(), "base64": True},
        ],
        **A,
    )
    assert written is not None and written.successful_key_count == 3
    assert cf.kv.namespaces.values.get("bin", namespace_id=ns, **A).read() == b"\x00\x01"
    got = cf.kv.namespaces.bulk_get(ns, keys=["text", "json", "nope"], **A)
    assert got is not None and got.values == {"text": "hello", "json": '{"a": 1}', "nope": None}
    as_json = cf.kv.namespaces.bulk_get(ns, keys=["json"], type="json", with_metadata=True, **A)
    assert as_json is not None and as_json.values is not None
    assert as_json.to_dict()["values"] == {"json": {"value": {"a": 1}, "metadata": None}}
    deleted = cf.kv.namespaces.bulk_delete(ns, body=["text", "json"], **A)
    assert deleted is not None and deleted.successful_key_count == 2
    assert [k.name for k in cf.kv.namespaces.keys.list(ns, **A)] == ["bin"]
    cf.kv.namespaces.bulk_delete(ns, body=["bin"], **A)
    assert list(cf.kv.namespaces.keys.list(ns, **A)) == []


def test_refusals_carry_kv_codes_and_change_nothing(cf: Cloudflare, ns: str) -> None:
    values = cf.kv.namespaces.values
    with pytest.raises(cloudflare.APIStatusError) as caught:
        values.update("k" * 513, namespace_id=ns, value=b"v", **A)
    assert code(caught.value) == 10020 and caught.value.status_code == 414
    with pytest.raises(cloudflare.BadRequestError) as too_soon:
        values.update("k", namespace_id=ns, value=b"v", expiration_ttl=30, **A)
    assert code(too_soon.value) == 10033
    with pytest.raises(cloudflare.APIStatusError) as meta:
        values.update("k", namespace_id=ns, value=b"v", metadata={"m": "x" * 1100}, **A)
    assert code(meta.value) == 10023 and meta.value.status_code == 413
    with pytest.raises(cloudflare.BadRequestError):
        cf.kv.namespaces.bulk_update(
            ns, body=[{"key": "a", "value": "1"}, {"key": "b", "value": "2", "colour": 1}], **A
        )  # type: ignore[list-item]
    assert list(cf.kv.namespaces.keys.list(ns, **A)) == []


def test_a_read_only_token_reads_and_cannot_write(server: RunningServer, cf: Cloudflare, ns: str) -> None:
    cf.kv.namespaces.values.update("k", namespace_id=ns, value=b"v", **A)
    reader = sdk(server, read_only=True)
    assert reader.kv.namespaces.values.get("k", namespace_id=ns, **A).read() == b"v"
    assert [n.id for n in reader.kv.namespaces.list(**A)] == [ns]
    for write in (
        lambda: reader.kv.namespaces.values.update("k", namespace_id=ns, value=b"w", **A),
        lambda: reader.kv.namespaces.values.delete("k", namespace_id=ns, **A),
        lambda: reader.kv.namespaces.create(title="other", **A),
        lambda: reader.kv.namespaces.delete(ns, **A),
        lambda: reader.kv.namespaces.bulk_update(ns, body=[{"key": "k", "value": "w"}], **A),
    ):
        with pytest.raises(cloudflare.PermissionDeniedError):
            write()
    assert cf.kv.namespaces.values.get("k", namespace_id=ns, **A).read() == b"v"


def test_another_account_cannot_reach_the_namespace(server: RunningServer, cf: Cloudflare, ns: str) -> None:
    cf.kv.namespaces.values.update("k", namespace_id=ns, value=b"v", **A)
    other = sdk(server, "acc2")
    with pytest.raises(cloudflare.PermissionDeniedError):
        other.kv.namespaces.list(**A)  # their token, our account
    with pytest.raises(cloudflare.NotFoundError):
        other.kv.namespaces.values.get("k", namespace_id=ns, account_id="acc2")  # our id, their account
    assert list(other.kv.namespaces.list(account_id="acc2")) == []


def test_a_queue_scoped_token_is_refused(server: RunningServer, ns: str) -> None:
    scoped = sdk(server, queues=["emails"])
    with pytest.raises(cloudflare.PermissionDeniedError):
        scoped.kv.namespaces.list(**A)


def test_a_raw_body_put_stores_bytes(server: RunningServer, ns: str) -> None:
    secret = server.tokens.create(ACCOUNT)[0]
    url = f"{server.url}/client/v4/accounts/{ACCOUNT}/storage/kv/namespaces/{ns}/values/a%2Fb%3F"
    headers = {"authorization": f"Bearer {secret}"}
    assert httpx.put(url, content=b"\x00raw", headers=headers).status_code == 200
    answer = httpx.get(url, headers=headers)
    assert answer.content == b"\x00raw" and answer.headers["conveyor-kv-type"] == "bytes"
    listed = httpx.get(f"{server.url}/client/v4/accounts/{ACCOUNT}/storage/kv/namespaces/{ns}/keys", headers=headers)
    assert [k["name"] for k in listed.json()["result"]] == ["a/b?"]


def test_every_kv_route_is_in_the_openapi_document() -> None:
    from conveyor.server import kv_routes
    from conveyor.server.openapi import document

    served = {
        (route.path.replace(":path}", "}"), method.lower())
        for route in kv_routes.ROUTES
        for method in route.methods or ()
        if method != "HEAD"
    }
    described = {(path, method) for path, ops in document()["paths"].items() for method in ops}
    assert served <= described


def test_the_remote_client_with_a_read_only_token_reads_and_is_refused_writes(server: RunningServer) -> None:
    with server.connect(ACCOUNT) as writer:
        writer.create_kv_namespace("meta").put("k", {"v": 1}, metadata={"m": 1})
    with server.connect(ACCOUNT, read_only=True) as reader:
        kv = reader.kv("meta")
        assert kv.get_with_metadata("k") == ({"v": 1}, {"m": 1})
        with pytest.raises(conveyor.Forbidden):
            kv.put("k", "w")
        with pytest.raises(conveyor.Forbidden):
            reader.create_kv_namespace("other")
        assert kv.get("k") == {"v": 1}
