"""The writer side: write the file no live reader holds, then swap the version word."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from conveyor.mmapsync import _native  # noqa: F401  (refuses a missing or stale _atomics, saying why)
from conveyor.mmapsync._atomics import fetch_add, live_pins, load, lock, store, unlock
from conveyor.mmapsync.errors import ReadersStillActive
from conveyor.mmapsync.layout import (
    HEADER_SIZE,
    MAX_SIZE,
    PUBLICATIONS_OFFSET,
    SLOT_SIZE,
    WORD_OFFSET,
    WRITER_LOCK,
    Version,
    checksum,
    data_path,
)
from conveyor.mmapsync.state import DataFiles, StateFile

FIRST_BACKOFF = 20e-6
LAST_BACKOFF = 5e-3


class Publisher:
    """Publishes versions of one data set; publishers in several processes take turns by a lock."""

    def __init__(self, state: StateFile, prefix: str) -> None:
        self._state = state
        self._prefix = prefix
        self._data = DataFiles(prefix, writable=True)
        self._lock_fd = os.open(state.path, os.O_RDWR)
        self.last: Version | None = None
        """The version this publisher published most recently."""

    @contextmanager
    def writing(self, size: int, grace: float) -> Iterator[memoryview]:
        """Yield ``size`` writable bytes of the idle data file; publish them when the block ends.

        Nothing is published if the block raises.
        """
        if not 0 <= size <= MAX_SIZE:
            raise ValueError(f"data size {size} outside 0..{MAX_SIZE}")
        lock(self._lock_fd, *WRITER_LOCK)
        try:
            target = 1 - (load(self._state.buffer, WORD_OFFSET) & 1)
            self._wait_for_readers(target, grace)
            buffer = self._data.view(target, size)
            yield buffer
            published = Version(index=target, size=size, checksum=checksum(buffer))
            store(self._state.buffer, WORD_OFFSET, published.word)
            fetch_add(self._state.buffer, PUBLICATIONS_OFFSET, 1)
            self.last = published
        finally:
            unlock(self._lock_fd, *WRITER_LOCK)

    def _wait_for_readers(self, target: int, grace: float) -> None:
        deadline = time.monotonic() + grace
        backoff = FIRST_BACKOFF
        while True:
            live = live_pins(self._state.buffer, self._lock_fd, HEADER_SIZE, SLOT_SIZE, self._state.slots, target + 1)
            if live == 0:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise ReadersStillActive(
                    f"{live} live reader(s) still hold {data_path(self._prefix, target)} after the "
                    f"{grace} s grace period; nothing was published"
                )
            time.sleep(min(backoff, left))
            backoff = min(backoff * 2, LAST_BACKOFF)

    def close(self) -> None:
        """Close the publisher's descriptor."""
        os.close(self._lock_fd)
