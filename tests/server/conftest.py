"""Fixtures for the HTTP server's tests: a real server on 127.0.0.1 and clients of it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cloudflare import Cloudflare

from conveyor.server.testing import RunningServer, running_server

ACCOUNT = "acc1"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningServer]:
    with running_server(f"sqlite://{tmp_path / 'data'}") as running:
        yield running


@pytest.fixture
def token(server: RunningServer) -> str:
    return server.tokens.create(ACCOUNT)[0]


def sdk(server: RunningServer, token: str) -> Cloudflare:
    """Cloudflare's own Python SDK, pointed at the server (no retries: a refusal must show at once)."""
    return Cloudflare(api_token=token, base_url=server.url + "/client/v4", max_retries=0)


@pytest.fixture
def cf(server: RunningServer, token: str) -> Iterator[Cloudflare]:
    client = sdk(server, token)
    try:
        yield client
    finally:
        client.close()
