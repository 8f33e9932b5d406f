"""Identifiers and timestamps in Cloudflare's formats."""

from __future__ import annotations

import itertools
import os
from datetime import UTC, datetime

_sequence = itertools.count()


def new_id() -> str:
    """A random id: 32 lowercase hex characters, like Cloudflare's queue, consumer and message ids."""
    return os.urandom(16).hex()


def new_ids(count: int) -> list[str]:
    """``count`` ids like :func:`new_id`'s, from one read of the OS's randomness (a batch send's)."""
    pool = os.urandom(16 * count).hex()
    return [pool[i : i + 32] for i in range(0, 32 * count, 32)]


def ordered_id(now_ms: int) -> str:
    """A random id like :func:`new_id`'s that sorts by ``now_ms`` and, within one process and
    millisecond, by the order of the calls (rules listed in the order they were added)."""
    return f"{now_ms & 0xFFFFFFFFFFFF:012x}{next(_sequence) & 0xFFFF:04x}{os.urandom(8).hex()}"


def iso_now() -> str:
    """The current time in ISO-8601 with microseconds and a ``Z``, as Cloudflare writes it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
