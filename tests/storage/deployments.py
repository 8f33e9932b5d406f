"""A client of a fresh deployment on either engine whose buckets may live in declared shared
directories (under the test's ``tmp_path``), for the suites of buckets and of the tools on them.

>>> with deployment_client("postgres", tmp_path, monkeypatch) as cv: ...
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import conveyor
from conveyor.storage.service import SHARED_DIRECTORIES_VARIABLE
from tests.engine.postgres.support import fresh_client


@contextmanager
def deployment_client(engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[conveyor.Conveyor]:
    """``engine`` "sqlite" (a directory in ``tmp_path``) or "postgres" (a fresh database)."""
    monkeypatch.setenv(SHARED_DIRECTORIES_VARIABLE, str(tmp_path / "shared"))
    client = conveyor.connect(f"sqlite://{tmp_path / 'data'}") if engine == "sqlite" else fresh_client()
    try:
        yield client
    finally:
        client.close()
