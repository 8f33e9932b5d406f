"""Fixtures of the conformance suite (helpers live in ``support.py``)."""

from __future__ import annotations

import pytest

import conveyor
from tests.conformance.support import FakeClock


@pytest.fixture
def clock(conveyor_client: conveyor.Conveyor) -> FakeClock:
    """Swap the engine's clock for a :class:`FakeClock`: delays, leases and retention stop moving
    until the test advances it (engines read time only from ``engine.clock``)."""
    fake = FakeClock()
    conveyor_client.engine.clock = fake
    return fake


@pytest.fixture
def queue(conveyor_client: conveyor.Conveyor) -> conveyor.Queue:
    return conveyor_client.create_queue("q")


@pytest.fixture
def pull_queue(queue: conveyor.Queue) -> conveyor.Queue:
    """Queue ``q`` with an ``http_pull`` consumer (visibility timeout 30 s, 3 retries, no DLQ)."""
    queue.add_pull_consumer()
    return queue
