"""Waiting in tests for a condition, with a deadline, instead of sleeping for a guessed time.

>>> wait_for(lambda: queue.metrics().backlog_count == 0, what="the queue drained")
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout: float = 20.0, what: str = "the condition", poll: float = 0.01) -> T:
    """Call ``condition`` every ``poll`` seconds until it returns something true, and return that;
    fail the test, naming ``what``, if ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while not (outcome := condition()):
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(poll)
    return outcome
