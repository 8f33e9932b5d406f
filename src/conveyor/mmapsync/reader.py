"""The reader side: one slot in the state file's table, pinned and unpinned by the native ``Pin``."""

from __future__ import annotations

import os
import random
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

from conveyor.mmapsync import _native  # noqa: F401  (refuses a missing or stale _atomics, saying why)
from conveyor.mmapsync._atomics import Pin, store, try_lock
from conveyor.mmapsync.errors import TooManyReaders
from conveyor.mmapsync.layout import PUBLICATIONS_OFFSET, SLOT_SIZE, WORD_OFFSET, Version, slot_offset
from conveyor.mmapsync.state import DataFiles, StateFile

T = TypeVar("T")


class VersionDecoder(Generic[T]):
    """Builds what a read yields for a version word: maps the data file, then applies ``decode``.

    The native pin calls it once per new version and caches the result.
    """

    def __init__(self, state: StateFile, data: DataFiles, decode: Callable[[memoryview], T]) -> None:
        self._state = state
        self._data = data
        self._decode = decode

    def __call__(self, word: int) -> T:
        if word == 0:
            self._state.require_published()
        version = Version.unpack(word)
        return self._decode(self._data.view(version.index, version.size))


class ReaderSlot(Generic[T]):
    """A reader slot owned by this process, proved by an open-file-description lock on its byte range.

    The lock lives on a descriptor of its own, so it is held exactly as long as the slot is open and the
    kernel drops it the moment the process dies: that is how the writer tells a crashed reader's stale
    pin from a live one. The descriptor closes when the slot is closed or garbage-collected.
    """

    def __init__(self, state: StateFile, decoder: VersionDecoder[T]) -> None:
        self._state = state
        lock_fd = os.open(state.path, os.O_RDWR)
        self._release = weakref.finalize(self, os.close, lock_fd)
        self.slot = self._claim(lock_fd)
        offset = slot_offset(self.slot)
        store(state.buffer, offset, 0)  # a previous, dead owner may have left its pin behind
        self.pin = Pin(state.buffer, WORD_OFFSET, PUBLICATIONS_OFFSET, offset, decoder)

    def _claim(self, lock_fd: int) -> int:
        count = self._state.slots
        start = random.randrange(count)
        for step in range(count):
            slot = (start + step) % count
            if try_lock(lock_fd, slot_offset(slot), SLOT_SIZE):
                return slot
        self._release()
        raise TooManyReaders(f"all {count} reader slots of {self._state.path} are held by live readers")

    def close(self) -> None:
        """Give the slot back; refused while a read is held, which would lose its protection."""
        if self.pin.depth:
            raise RuntimeError("close() while a read is held")
        self.pin.forget()
        self._release()

    def abandon(self) -> None:
        """In a forked child: drop the inherited slot without touching the parent's pin or lock."""
        self._release()
