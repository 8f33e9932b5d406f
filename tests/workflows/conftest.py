"""Fixtures of the workflow suite: every test runs on SQLite, on PostgreSQL, and over HTTP (a
remote client and its workers, the server on a SQLite directory)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import conveyor
from conveyor.server.testing import http_client
from tests.conformance.support import FakeClock
from tests.engine.postgres.support import fresh_client as postgres_client

ENGINES = {
    "sqlite": lambda tmp: conveyor.connect(f"sqlite://{tmp / 'data'}"),
    "postgres": postgres_client,
    "http": lambda tmp: http_client(tmp / "data", account_id="local"),
}


@pytest.fixture(params=sorted(ENGINES))
def cv(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[conveyor.Conveyor]:
    """A fresh deployment on each engine."""
    client = ENGINES[str(request.param)](tmp_path)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def clock(cv: conveyor.Conveyor) -> FakeClock:
    """The engine's clock, moved by hand: sleeps, timeouts and retention wait for the test."""
    fake = FakeClock()
    cv.engine.clock = fake
    return fake


@pytest.fixture
def app(cv: conveyor.Conveyor) -> conveyor.App:
    return conveyor.App(cv, grace_period=5)
