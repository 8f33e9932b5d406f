"""Fixtures of the dashboard's tests: a real server on 127.0.0.1 over a fresh SQLite directory, and
browsers-as-HTTP-clients logged in with tokens of its deployment."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conveyor.server.testing import RunningServer, running_server

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningServer]:
    with running_server(f"sqlite://{tmp_path / 'data'}") as running:
        yield running


def logged_in(server: RunningServer, secret: str) -> httpx.Client:
    """A client holding the session cookie of ``secret``'s login."""
    client = httpx.Client(base_url=server.url, timeout=30)
    response = client.post("/dash/login", data={"token": secret})
    assert response.status_code == 303, response.text
    return client


def csrf_of(page: str) -> str:
    found = CSRF.search(page)
    assert found is not None, "the page has no CSRF field"
    return found.group(1)
