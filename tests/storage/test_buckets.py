"""Buckets: names, where they live, their credentials, and every refusal of a bad one."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import conveyor
from conveyor.egress import EgressPolicy, EgressRefused
from conveyor.storage import (
    BucketExists,
    BucketNotEmpty,
    BucketNotFound,
    BucketUnauthorized,
    BucketUnreachable,
    InvalidBucketLocation,
    InvalidBucketName,
)
from conveyor.storage.facade import storage_of
from conveyor.storage.service import INLINE_LIMIT, SHARED_DIRECTORIES_VARIABLE
from conveyor.storage.stores import CONNECT_TIMEOUT, MAX_RETRIES, RETRY_TIMEOUT
from tests.storage.conftest import make_bucket
from tests.storage.s3_server import S3Server


def s3_options(s3: S3Server, **changes: str) -> dict[str, str]:
    options = {
        "url": f"s3://{s3.new_bucket()}",
        "endpoint": s3.endpoint,
        "region": "us-east-1",
        "access_key_id": s3.access_key_id,
        "secret_access_key": s3.secret_access_key,
    }
    options.update(changes)
    return options


def test_buckets_are_created_listed_found_and_deleted(cv: conveyor.Conveyor, tmp_path: Path) -> None:
    make_bucket(cv, "local", "one", tmp_path, None)
    make_bucket(cv, "local", "two", tmp_path, None)
    assert [b.name for b in cv.list_buckets()] == ["one", "two"]
    assert cv.bucket("one").name == "one"
    with pytest.raises(BucketExists):
        make_bucket(cv, "local", "one", tmp_path, None)
    cv.delete_bucket("one")
    assert [b.name for b in cv.list_buckets()] == ["two"]
    with pytest.raises(BucketNotFound) as caught:
        cv.bucket("one")
    assert caught.value.code == BucketNotFound.code
    with pytest.raises(BucketNotFound):
        cv.delete_bucket("one")


def test_a_local_bucket_is_a_directory_of_the_sqlite_deployment(tmp_path: Path) -> None:
    with conveyor.connect(f"sqlite://{tmp_path / 'data'}") as cv:
        large = b"/*! jQuery */" + bytes(INLINE_LIMIT)
        cv.create_bucket("cdn").put("jquery/jquery.js", large)
        assert (tmp_path / "data" / "buckets" / "local" / "cdn" / "jquery" / "jquery.js").read_bytes() == large
        assert (tmp_path / "data" / "storage.db").exists()


def test_a_bucket_that_is_not_empty_is_not_deleted(cv: conveyor.Conveyor, tmp_path: Path) -> None:
    b = make_bucket(cv, "local", "full", tmp_path, None)
    b.put("k", b"v")
    with pytest.raises(BucketNotEmpty, match="not empty"):
        cv.delete_bucket("full")
    assert cv.bucket("full").get("k").bytes() == b"v"
    b.delete("k")
    cv.delete_bucket("full")


@pytest.mark.parametrize("name", ["ab", "a" * 64, "Upper", "-lead", "trail-", "under_score", "dot.ted", "", 7])
def test_bad_bucket_names_are_refused(cv: conveyor.Conveyor, name: object) -> None:
    with pytest.raises(InvalidBucketName, match="3 to 63"):
        cv.create_bucket(name)  # type: ignore[arg-type]
    assert cv.list_buckets() == []


def test_an_object_of_a_missing_bucket_is_refused(cv: conveyor.Conveyor, tmp_path: Path) -> None:
    b = make_bucket(cv, "local", "gone", tmp_path, None)
    cv.delete_bucket("gone")
    with pytest.raises(BucketNotFound):
        b.put("k", b"v")


def test_buckets_belong_to_their_account(tmp_path: Path) -> None:
    with (
        conveyor.connect(f"sqlite://{tmp_path}") as local,
        conveyor.connect(f"sqlite://{tmp_path}", account_id="0123456789abcdef0123456789abcdef") as other,
    ):
        local.create_bucket("mine").put("secret", b"local's")
        assert other.list_buckets() == []
        with pytest.raises(BucketNotFound):
            other.bucket("mine")
        other.create_bucket("mine").put("secret", b"other's")
        assert local.bucket("mine").get("secret").bytes() == b"local's"


def test_an_s3_bucket_keeps_its_objects_under_its_prefix(cv: conveyor.Conveyor, s3_server: S3Server) -> None:
    name = s3_server.new_bucket()
    b = cv.create_bucket("mirror", **s3_options(s3_server, url=f"s3://{name}/some/prefix"))
    b.put("a/b.txt", b"hi")
    assert s3_server.keys(name) == ["some/prefix/a/b.txt"]


def test_secrets_are_never_shown(cv: conveyor.Conveyor, s3_server: S3Server) -> None:
    b = cv.create_bucket("secretive", **s3_options(s3_server))
    for shown in (repr(b), repr(b.info), repr(cv.list_buckets()), repr(cv.bucket("secretive").info)):
        assert s3_server.secret_access_key not in shown
    config, _ = storage_of(cv).store(cv.deployment.account, "secretive")
    assert s3_server.secret_access_key not in repr(config)


def test_wrong_credentials_are_refused_when_the_bucket_is_created(cv: conveyor.Conveyor, s3_server: S3Server) -> None:
    wrong_secret = "not-the-secret-key-0123456789"
    with pytest.raises(BucketUnauthorized, match="credentials") as caught:
        cv.create_bucket("wrong", **s3_options(s3_server, secret_access_key=wrong_secret))
    assert wrong_secret not in str(caught.value)
    with pytest.raises(BucketUnauthorized):
        cv.create_bucket("wrong", **s3_options(s3_server, access_key_id="AKIANOSUCHKEY0000000"))
    assert cv.list_buckets() == []


def test_an_unreachable_endpoint_fails_clearly_within_a_bounded_time(cv: conveyor.Conveyor) -> None:
    from conveyor.server.testing import closed_port

    started = time.monotonic()
    with closed_port() as port, pytest.raises(BucketUnreachable, match="cannot reach"):
        cv.create_bucket(
            "nowhere",
            url="s3://b",
            endpoint=f"http://127.0.0.1:{port}",
            access_key_id="key",
            secret_access_key="secret-0123456789",
        )
    bound = CONNECT_TIMEOUT.total_seconds() * (MAX_RETRIES + 1) + RETRY_TIMEOUT.total_seconds()
    assert time.monotonic() - started < bound
    assert cv.list_buckets() == []


def test_a_tenant_endpoint_on_a_refused_range_is_refused(cv: conveyor.Conveyor, s3_server: S3Server) -> None:
    service, account = storage_of(cv), cv.deployment.account
    options = s3_options(s3_server)
    with pytest.raises(EgressRefused, match="loopback"):
        service.create_bucket(account, "tenant", egress=EgressPolicy(), **options)
    assert cv.list_buckets() == []
    service.create_bucket(account, "tenant", egress=EgressPolicy.parse("127.0.0.1"), **options)
    assert [b.name for b in cv.list_buckets()] == ["tenant"]


def test_a_tenant_cannot_name_a_directory_the_operator_did_not_share(
    cv: conveyor.Conveyor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, account = storage_of(cv), cv.deployment.account
    with pytest.raises(InvalidBucketLocation, match="not declared shared"):
        service.create_bucket(account, "etc", url="file:///etc", egress=EgressPolicy())
    monkeypatch.setenv(SHARED_DIRECTORIES_VARIABLE, str(tmp_path / "shared"))
    with pytest.raises(InvalidBucketLocation, match="not declared shared"):
        service.create_bucket(account, "escape", url=(tmp_path / "shared-not").as_uri(), egress=EgressPolicy())
    service.create_bucket(account, "ok-dir", url=(tmp_path / "shared" / "ok").as_uri(), egress=EgressPolicy())


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"url": "http://example.com/bucket"}, "s3://bucket"),
        ({"url": "s3://"}, "s3://bucket"),
        ({"url": "s3://b", "endpoint": "ftp://x"}, "http"),
        ({"url": "s3://b", "access_key_id": "only-the-id"}, "both"),
        ({"endpoint": "http://127.0.0.1:9000"}, "s3:// url"),
        ({"url": "file://host/dir"}, "file:///"),
    ],
)
def test_bad_locations_are_refused(cv: conveyor.Conveyor, options: dict[str, str], problem: str) -> None:
    with pytest.raises(InvalidBucketLocation, match=problem):
        cv.create_bucket("bad", **options)
    assert cv.list_buckets() == []


def test_postgresql_needs_s3_or_a_shared_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.engine.postgres.support import fresh_client

    monkeypatch.delenv(SHARED_DIRECTORIES_VARIABLE, raising=False)
    with fresh_client() as cv:
        with pytest.raises(InvalidBucketLocation, match="S3-compatible"):
            cv.create_bucket("plain")
        with pytest.raises(InvalidBucketLocation, match="not declared shared"):
            cv.create_bucket("dir", url=(tmp_path / "d").as_uri())
        monkeypatch.setenv(SHARED_DIRECTORIES_VARIABLE, str(tmp_path))
        cv.create_bucket("dir", url=(tmp_path / "d").as_uri()).put("k", b"v")
        assert (tmp_path / "d" / "k").read_bytes() == b"v"
