"""The reader side: one slot in the state file's table, pinned and unpinned by the native ``Pin``."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Generic, TypeVar

from conveyor.mmapsync import _native  # noqa: F401  (builds and registers _atomics)
from conveyor.mmapsync._atomics import Pin, store, try_lock
from conveyor.mmapsync.errors import TooManyReaders
from conveyor.mmapsync.layout import PUBLICATIONS_OFFSET, SLOT_SIZE, WORD_OFFSET, Version, slot_offset
from conveyor.mmapsync.state import DataFiles, StateFile

T = TypeVar("T")


class ReaderSlot(Generic[T]):
    """A reader slot this process owns, proved by an open-file-description lock on its byte range.

    The lock lives on a descriptor of its own, so it is held exactly as long as this object is open and
    the kernel drops it the moment the process dies: that is how the writer tells a crashed reader's
    stale pin from a live one.
    """

    def __init__(self, state: StateFile, prefix: str, decode: Callable[[memoryview], T]) -> None:
        self._state = state
        self._data = DataFiles(prefix, writable=False)
        self._decode = decode
        self._lock_fd = os.open(state.path, os.O_RDWR)
        try:
            self.slot = self._claim()
        except BaseException:
            os.close(self._lock_fd)
            raise
        offset = slot_offset(self.slot)
        store(state.buffer, offset, 0)  # a previous, dead owner may have left its pin behind
        self.pin = Pin(state.buffer, WORD_OFFSET, PUBLICATIONS_OFFSET, offset, self._refresh)

    def _claim(self) -> int:
        count = self._state.slots
        start = random.randrange(count)
        for step in range(count):
            slot = (start + step) % count
            if try_lock(self._lock_fd, slot_offset(slot), SLOT_SIZE):
                return slot
        raise TooManyReaders(f"all {count} reader slots of {self._state.path} are held by live readers")

    def _refresh(self, word: int) -> T:
        if word == 0:
            self._state.require_published()
        version = Version.unpack(word)
        return self._decode(self._data.view(version.index, version.size))

    def close(self) -> None:
        """Give the slot back, which a read still in progress would lose its protection by."""
        if self.pin.depth:
            raise RuntimeError("close() while a read is held")
        self.pin.forget()
        os.close(self._lock_fd)

    def abandon(self) -> None:
        """In a forked child: drop the inherited slot without touching the parent's pin or lock."""
        os.close(self._lock_fd)
