"""Fixtures for the CLI tests: a click runner on a fresh SQLite data directory, and a Python client
on the same directory to check what the commands did."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import conveyor

from .support import Cli


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite://{tmp_path / 'data'}"


@pytest.fixture
def run(url: str) -> Cli:
    return Cli(url)


@pytest.fixture
def client(url: str) -> Iterator[conveyor.Conveyor]:
    """A Python client on the same data directory, to check what the CLI did."""
    cv = conveyor.connect(url)
    try:
        yield cv
    finally:
        cv.close()
