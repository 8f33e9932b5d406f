"""Opening, creating and checking the state file; mapping the data files."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from conveyor.mmapsync import _native  # noqa: F401  (refuses a missing or stale _atomics, saying why)
from conveyor.mmapsync._atomics import load
from conveyor.mmapsync.errors import DataSetNotFound, ForeignFile, NothingPublished, TruncatedFile
from conveyor.mmapsync.layout import (
    HEADER,
    HEADER_SIZE,
    LAYOUT_VERSION,
    MAGIC,
    PUBLICATIONS_OFFSET,
    WORD_OFFSET,
    Version,
    data_path,
    state_path,
    state_size,
)


class StateFile:
    """The mapped ``PREFIX_state`` of one data set: the version word and the reader slot table."""

    def __init__(self, path: Path, buffer: mmap.mmap, slots: int) -> None:
        self.path = path
        self.buffer = buffer
        self.slots = slots

    @classmethod
    def open(cls, prefix: str | Path) -> StateFile:
        """Map an existing state file, refusing a missing, truncated or foreign one."""
        path = state_path(prefix)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            raise DataSetNotFound(f"no mmapsync data set at {prefix}: {path} does not exist") from None
        try:
            return cls._map(path, fd)
        finally:
            os.close(fd)

    @classmethod
    def create(cls, prefix: str | Path, slots: int) -> StateFile:
        """Map the state file, first creating it (atomically: write aside, then link) if missing."""
        path = state_path(prefix)
        if not path.exists():
            scratch = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            with open(scratch, "wb") as file:
                file.write(HEADER.pack(0, MAGIC, LAYOUT_VERSION, slots, 0))
                file.truncate(state_size(slots))
            try:
                os.link(scratch, path)
            except FileExistsError:
                pass
            finally:
                os.unlink(scratch)
        return cls.open(prefix)

    @classmethod
    def _map(cls, path: Path, fd: int) -> StateFile:
        size = os.fstat(fd).st_size
        if size < HEADER_SIZE:
            raise TruncatedFile(f"{path} is {size} bytes, shorter than the {HEADER_SIZE}-byte state header")
        _, magic, layout, slots, _ = HEADER.unpack(os.pread(fd, HEADER_SIZE, 0))
        if magic != MAGIC:
            raise ForeignFile(f"{path} is not an mmapsync state file (magic {magic!r})")
        if layout != LAYOUT_VERSION:
            raise ForeignFile(f"{path} has state layout {layout}; this Conveyor reads {LAYOUT_VERSION}")
        if size < state_size(slots):
            raise TruncatedFile(f"{path} is {size} bytes; its {slots} reader slots need {state_size(slots)}")
        if size != state_size(slots):
            raise ForeignFile(f"{path} is {size} bytes, not the {state_size(slots)} its header implies")
        return cls(path, mmap.mmap(fd, size), slots)

    def word(self) -> int:
        """The version word, loaded atomically."""
        return load(self.buffer, WORD_OFFSET)

    def version(self) -> Version:
        """The published version, or :class:`NothingPublished` before the first write."""
        word = self.word()
        if word == 0:
            self.require_published()
        return Version.unpack(word)

    def require_published(self) -> None:
        """Raise :class:`NothingPublished` unless a version was ever published."""
        if load(self.buffer, PUBLICATIONS_OFFSET) == 0:
            raise NothingPublished(f"nothing has been published to {self.path} yet")


class DataFiles:
    """``PREFIX_data_0`` and ``PREFIX_data_1``, each mapped once and remapped only when it grew."""

    def __init__(self, prefix: str | Path, *, writable: bool) -> None:
        self._prefix = prefix
        self._writable = writable
        self._maps: list[mmap.mmap | None] = [None, None]

    def view(self, index: int, size: int) -> memoryview:
        """The first ``size`` bytes of data file ``index`` (zero-copy), growing it when writable."""
        if size == 0:
            return memoryview(bytearray()) if self._writable else memoryview(b"")
        current = self._maps[index]
        if current is None or len(current) < size:
            current = self._maps[index] = self._map(index, size)
        return memoryview(current)[:size]

    def _map(self, index: int, size: int) -> mmap.mmap:
        path = data_path(self._prefix, index)
        flags = os.O_RDWR | os.O_CREAT if self._writable else os.O_RDONLY
        try:
            fd = os.open(path, flags, 0o644)
        except FileNotFoundError:
            raise DataSetNotFound(f"data file {path} of {self._prefix} does not exist") from None
        try:
            length = os.fstat(fd).st_size
            if length < size and self._writable:
                os.ftruncate(fd, size)
                length = size
            if length < size:
                raise TruncatedFile(f"{path} is {length} bytes; the published version needs {size}")
            access = mmap.ACCESS_WRITE if self._writable else mmap.ACCESS_READ
            return mmap.mmap(fd, length, access=access)
        finally:
            os.close(fd)
