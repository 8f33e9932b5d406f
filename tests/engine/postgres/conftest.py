"""Fixtures of the PostgreSQL tests: the real server (a throw-away one if none answers), a throwaway
schema per test.

The long runs — the 1,000,000-message soak and the multi-process simulation — are marked ``soak``
and ``simulation`` and left out of the default run; select them with ``pytest -m soak`` or
``pytest -m simulation``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import conveyor
from tests.engine.postgres.cluster import server_url
from tests.engine.postgres.support import drop_schema, new_schema, schema_url

LONG_RUNS = ("soak", "simulation")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "soak: the 1,000,000-message PostgreSQL soak (minutes; run with -m soak)")
    config.addinivalue_line("markers", "simulation: several machines simulated on one PostgreSQL (-m simulation)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = config.getoption("markexpr") or ""
    keep, dropped = [], []
    for item in items:
        long_run = next((m for m in LONG_RUNS if item.get_closest_marker(m)), None)
        (dropped if long_run and long_run not in chosen else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(scope="session", autouse=True)
def postgres_server() -> None:
    """The configured PostgreSQL, or a throw-away cluster if none answers (tests fail, never skip,
    without one)."""
    server_url()


@pytest.fixture
def schema() -> Iterator[str]:
    name = new_schema()
    yield name
    drop_schema(name)


@pytest.fixture
def pg_url(schema: str) -> str:
    """A URL whose ``search_path`` is a fresh schema, so tests never see each other's queues."""
    return schema_url(schema)


@pytest.fixture
def pg_client(pg_url: str) -> Iterator[conveyor.Conveyor]:
    client = conveyor.connect(pg_url)
    try:
        yield client
    finally:
        client.close()
