"""Fixtures of the storage suite: a deployment on each engine (SQLite, PostgreSQL) for the
metadata, and a bucket of each kind: a local directory, and two real S3-compatible server
processes (moto_server, in memory, with authentication on; s3rver, on disk)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import conveyor
from conveyor.storage import Bucket
from tests.storage.deployments import deployment_client
from tests.storage.s3_server import S3Server, start_s3_server
from tests.storage.s3rver import start_s3rver


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    server = start_s3_server(tmp_path_factory.mktemp("moto"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3rver_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    server = start_s3rver(tmp_path_factory.mktemp("s3rver-data"), tmp_path_factory.mktemp("s3rver-logs"))
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def cv(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[conveyor.Conveyor]:
    with deployment_client(request.param, tmp_path, monkeypatch) as client:
        yield client


def make_bucket(cv: conveyor.Conveyor, kind: str, name: str, tmp_path: Path, s3: S3Server | None) -> Bucket:
    if kind in ("s3", "s3rver"):
        assert s3 is not None
        return cv.create_bucket(
            name,
            url=f"s3://{s3.new_bucket()}/conveyor",
            endpoint=s3.endpoint,
            region="us-east-1",
            access_key_id=s3.access_key_id,
            secret_access_key=s3.secret_access_key,
        )
    if cv.deployment.kind == "sqlite":
        return cv.create_bucket(name)
    return cv.create_bucket(name, url=(tmp_path / "shared" / name).as_uri())


@pytest.fixture(params=["local", "s3", "s3rver"])
def bucket(request: pytest.FixtureRequest, cv: conveyor.Conveyor, tmp_path: Path) -> Bucket:
    servers = {"s3": "s3_server", "s3rver": "s3rver_server"}
    s3 = request.getfixturevalue(servers[request.param]) if request.param in servers else None
    return make_bucket(cv, request.param, "files", tmp_path, s3)
