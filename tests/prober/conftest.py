"""Fixtures of the prober suite: a deployment on each engine, a test CA, and real target servers
on loopback addresses (each 127.0.0.x a host of its own)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import conveyor
from tests.engine.postgres.support import fresh_client
from tests.prober.target_servers import CertificateAuthority, TargetServer

Servers = Callable[..., TargetServer]


@pytest.fixture(params=["sqlite", "postgres"])
def cv(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[conveyor.Conveyor]:
    client = conveyor.connect(f"sqlite://{tmp_path / 'data'}") if request.param == "sqlite" else fresh_client()
    yield client
    client.close()


@pytest.fixture(scope="session")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path_factory.mktemp("ca"))


@pytest.fixture
def servers() -> Iterator[Servers]:
    """``servers(host_number, delay=, status=, tls=)``: a server on 127.0.0.<host_number>, stopped
    after the test."""
    started: list[TargetServer] = []

    def start(host: int, **options: Any) -> TargetServer:
        server = TargetServer(f"127.0.0.{host}", **options)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@contextmanager
def worker(prober: conveyor.Prober) -> Iterator[conveyor.App]:
    """The prober's app running in this process while the block runs."""
    prober.app.start()
    try:
        yield prober.app
    finally:
        prober.app.stop(grace=5)
