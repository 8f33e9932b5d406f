"""Fixtures of the Super Slurper suite: a real S3-compatible source (moto_server, authentication
on), a deployment on each engine, and a worker running the pipeline's consumers in this process."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import conveyor
from conveyor.slurper import Job
from conveyor.storage import Bucket
from conveyor.storage.service import SHARED_DIRECTORIES_VARIABLE
from tests.storage.deployments import deployment_client
from tests.storage.s3_server import S3Server, start_s3_server


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    server = start_s3_server(tmp_path_factory.mktemp("moto"))
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def cv(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[conveyor.Conveyor]:
    with deployment_client(request.param, tmp_path, monkeypatch) as client:
        yield client


def local_bucket(cv: conveyor.Conveyor, name: str) -> Bucket:
    """A bucket in a directory: the deployment's own on SQLite, a declared shared one on PostgreSQL."""
    if cv.deployment.kind == "sqlite":
        return cv.create_bucket(name)
    shared = Path(os.environ[SHARED_DIRECTORIES_VARIABLE])
    return cv.create_bucket(name, url=(shared / name).as_uri())


def s3_source(s3: S3Server, bucket: str, **extra: Any) -> dict[str, Any]:
    return {
        "vendor": "s3",
        "endpoint": s3.endpoint,
        "region": "us-east-1",
        "bucket": bucket,
        "secret": {"accessKeyId": s3.access_key_id, "secretAccessKey": s3.secret_access_key},
        **extra,
    }


@contextmanager
def pipeline_running(cv: conveyor.Conveyor, **settings: Any) -> Iterator[conveyor.App]:
    """A worker of the pipeline's three consumers, in this process, while the block runs."""
    app = conveyor.App(cv, grace_period=5)
    pipeline = conveyor.slurper.add_consumers(app, **{"retry_delay": 1, "tick_seconds": 1, **settings})
    app.pipeline = pipeline  # type: ignore[attr-defined]
    app.start()
    try:
        yield app
    finally:
        app.stop()
        pipeline.close()


def wait_for(job: Job, status: str = "completed", timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while job.info().status != status:
        if time.monotonic() > deadline:
            raise AssertionError(f"job still {job.info().status} after {timeout} s: {job.progress()}")
        time.sleep(0.1)
