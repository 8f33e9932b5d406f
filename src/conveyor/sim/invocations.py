"""What a consumer model produces: the invocations it started, each with the messages it handled."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Invocation:
    """One handler call: it started at ``start`` and returned at ``end`` (seconds after the send),
    handling the messages numbered ``messages``."""

    start: float
    end: float
    messages: range


def batches(count: int, size: int) -> list[range]:
    """``count`` messages in batches of ``size``, in the order they were sent; the last may be short."""
    return [range(first, min(first + size, count)) for first in range(0, count, size)]
