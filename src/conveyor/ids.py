"""Identifiers and timestamps in Cloudflare's formats."""

from __future__ import annotations

import itertools
import os
import threading
from datetime import UTC, datetime

_sequence = itertools.count()

# Message ids come from a pool of the OS's randomness read 4 KiB at a time (256 ids), not one
# read (a system call) per send: the same bytes, handed out once each. A forked child starts with
# an empty pool of its own, so it never hands out its parent's ids.
_POOL_BYTES = 4096
_pool_lock = threading.Lock()
_pool = ""
_pool_at = 0


def _empty_pool() -> None:
    global _pool, _pool_at, _pool_lock
    _pool_lock = threading.Lock()  # another thread may have held it when the process forked
    _pool, _pool_at = "", 0


os.register_at_fork(after_in_child=_empty_pool)


def new_id() -> str:
    """A random id: 32 lowercase hex characters, like Cloudflare's queue, consumer and message ids."""
    return os.urandom(16).hex()


def new_ids(count: int) -> list[str]:
    """``count`` ids like :func:`new_id`'s: a lone one from the pool above, a batch's from one read
    of the OS's randomness."""
    global _pool, _pool_at
    if count == 1:
        with _pool_lock:
            pool, at = _pool, _pool_at
            if at == len(pool):
                pool = _pool = os.urandom(_POOL_BYTES).hex()
                at = 0
            _pool_at = at + 32
        return [pool[at : at + 32]]
    pool = os.urandom(16 * count).hex()
    return [pool[i : i + 32] for i in range(0, 32 * count, 32)]


def ordered_id(now_ms: int) -> str:
    """A random id like :func:`new_id`'s that sorts by ``now_ms`` and, within one process and
    millisecond, by the order of the calls (rules listed in the order they were added)."""
    return f"{now_ms & 0xFFFFFFFFFFFF:012x}{next(_sequence) & 0xFFFF:04x}{os.urandom(8).hex()}"


def iso_now() -> str:
    """The current time in ISO-8601 with microseconds and a ``Z``, as Cloudflare writes it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
