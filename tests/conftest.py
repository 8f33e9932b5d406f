"""Shared fixtures. ``conveyor_client`` is parametrized over every engine: the conformance suite
runs once per engine (and, later, over the HTTP transport)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import conveyor
from conveyor.server.testing import http_client
from tests.engine.postgres.support import fresh_client as postgres_client

# Every embedded deployment sets 17 MB aside for a full disk (engine/sqlite/reserve.py), and the suite
# makes hundreds: 1 MiB each keeps the mechanism at work without gigabytes in the temporary directory
# (tests/engine/sqlite/storage/test_full_disk.py uses the real size). Subprocesses inherit it.
os.environ.setdefault("CONVEYOR_RESERVE_BYTES", str(1 << 20))

# Every engine the conformance suite runs against: name -> factory(tmp_path) -> Conveyor.
ENGINES: dict[str, Callable[[Path], conveyor.Conveyor]] = {
    "sqlite": lambda tmp: conveyor.connect(f"sqlite://{tmp / 'data'}"),
    "postgres": postgres_client,
    # A real server on 127.0.0.1 (SQLite behind it), driven through the remote transport.
    "http": lambda tmp: http_client(tmp / "data"),
}


@pytest.fixture(params=sorted(ENGINES))
def engine_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def conveyor_client(engine_name: str, tmp_path: Path) -> Iterator[conveyor.Conveyor]:
    """A fresh, empty deployment on each engine."""
    client = ENGINES[engine_name](tmp_path)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A fresh embedded (SQLite) data directory."""
    return tmp_path / "data"


@pytest.fixture
def second_client(engine_name: str, tmp_path: Path) -> Iterator[conveyor.Conveyor]:
    """Another connection to the deployment of ``conveyor_client`` (another producer process's
    view): an engine factory called twice with the same ``tmp_path`` opens the same deployment."""
    client = ENGINES[engine_name](tmp_path)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(autouse=True)
def environment_of_its_own() -> Iterator[None]:
    """Each test starts with the suite's environment: a command run in-process (click's runner)
    hands its options to ``App()`` through ``CONVEYOR_*`` variables, as it does in a real process,
    and those must not reach the next test."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)
