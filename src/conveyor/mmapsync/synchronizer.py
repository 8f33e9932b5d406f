"""``Synchronizer``: one writer publishes versions of a data set, many processes read them in place."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar, cast, overload

from conveyor.mmapsync.errors import NothingPublished
from conveyor.mmapsync.layout import DEFAULT_SLOTS, Version
from conveyor.mmapsync.publisher import Publisher
from conveyor.mmapsync.reader import ReaderSlot, VersionDecoder
from conveyor.mmapsync.state import DataFiles, StateFile

if TYPE_CHECKING:
    from typing_extensions import Buffer

T = TypeVar("T")

DEFAULT_GRACE = 1.0

_open_synchronizers: weakref.WeakSet[Synchronizer[object]] = weakref.WeakSet()


def _identity(data: memoryview) -> memoryview:
    return data


class Synchronizer(Generic[T]):
    """A data set at ``PREFIX_state``, ``PREFIX_data_0`` and ``PREFIX_data_1``.

    ``read()`` is a context manager yielding the published bytes as a zero-copy ``memoryview`` (or,
    given ``decode``, the object ``decode`` built from them once per version), valid until the block
    ends. Reading never waits for a lock: it pins the active data file in this reader's slot of the
    state file, re-checks the version and retries if a write slipped in. ``write()`` fills the other
    data file, waits up to ``grace`` seconds for live readers still pinning it, and swaps.

    Each thread reading through an instance gets a reader slot of its own; nested reads in one thread
    share that slot's pin, and so one version. ``slots`` sizes the slot table when this instance is
    the one that creates the state file: it bounds the reading threads open at once, over all processes.

    >>> sync = Synchronizer("/dev/shm/settings")
    >>> sync.write(b"shards=8")
    Version(index=1, size=8, checksum=484021)
    >>> with sync.read() as data:
    ...     bytes(data[:6])
    b'shards'
    """

    @overload
    def __init__(self: Synchronizer[memoryview], prefix: str | Path, *, slots: int = DEFAULT_SLOTS) -> None: ...

    @overload
    def __init__(
        self, prefix: str | Path, *, decode: Callable[[memoryview], T], slots: int = DEFAULT_SLOTS
    ) -> None: ...

    def __init__(
        self,
        prefix: str | Path,
        *,
        decode: Callable[[memoryview], T] | None = None,
        slots: int = DEFAULT_SLOTS,
    ) -> None:
        self.prefix = str(prefix)
        self._decode = decode if decode is not None else cast(Callable[[memoryview], T], _identity)
        self._slots = slots
        self._state: StateFile | None = None
        self._data: DataFiles | None = None
        self._readers: weakref.WeakSet[ReaderSlot[T]] = weakref.WeakSet()
        self._thread = threading.local()
        self._publisher: Publisher | None = None
        _open_synchronizers.add(cast(Synchronizer[object], self))

    def read(self) -> AbstractContextManager[T]:
        """Pin the published version for the ``with`` block and yield its data.

        Raises :class:`DataSetNotFound` if nothing exists at the prefix, :class:`NothingPublished`
        before the first write, :class:`TruncatedFile` or :class:`ForeignFile` for damaged files.
        """
        try:
            pin: AbstractContextManager[T] = self._thread.pin
        except AttributeError:
            pin = self._open_reader()
        return pin

    def write(self, data: Buffer, *, grace: float = DEFAULT_GRACE) -> Version:
        """Publish ``data`` as the next version and return it.

        Waits up to ``grace`` seconds for live readers of the idle data file; a dead reader's pin never
        delays it. Raises :class:`ReadersStillActive` (publishing nothing) if a live reader outstays it.
        """
        view = memoryview(data).cast("B")
        with self.writing(len(view), grace=grace) as target:
            target[:] = view
        return self.last_published()

    def writing(self, size: int, *, grace: float = DEFAULT_GRACE) -> AbstractContextManager[memoryview]:
        """Yield ``size`` writable bytes to fill in place; they are published when the block ends.

        For data built directly in the mapped file instead of copied there (``FeatureStore`` does).
        Nothing is published if the block raises.
        """
        return self._open_publisher().writing(size, grace)

    def last_published(self) -> Version:
        """The version this instance published last (another writer may have published since)."""
        published = self._open_publisher().last
        if published is None:
            raise NothingPublished(f"this Synchronizer has published nothing to {self.prefix}")
        return published

    def version(self) -> Version:
        """The version published now (index of the active data file, data size, checksum).

        Raises :class:`DataSetNotFound` or :class:`NothingPublished` when there is none.
        """
        return self._open_state(create=False).version()

    def close(self) -> None:
        """Give back this instance's reader slots and descriptors (no read may be held)."""
        for reader in list(self._readers):
            reader.close()
        if self._publisher is not None:
            self._publisher.close()
        self._forget()

    def __enter__(self) -> Synchronizer[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open_state(self, *, create: bool) -> StateFile:
        if self._state is None:
            self._state = StateFile.create(self.prefix, self._slots) if create else StateFile.open(self.prefix)
        return self._state

    def _open_reader(self) -> AbstractContextManager[T]:
        state = self._open_state(create=False)
        if self._data is None:
            self._data = DataFiles(self.prefix, writable=False)
        reader = ReaderSlot(state, VersionDecoder(state, self._data, self._decode))
        self._readers.add(reader)
        self._thread.reader = reader  # the slot, and so its lock, lives exactly as long as its thread
        self._thread.pin = reader.pin
        return cast(AbstractContextManager[T], reader.pin)

    def _open_publisher(self) -> Publisher:
        if self._publisher is None:
            self._publisher = Publisher(self._open_state(create=True), self.prefix)
        return self._publisher

    def _after_fork(self) -> None:
        # The child shares the parent's open file descriptions, and with them the parent's slot lock
        # and writer lock: it must not use them, so it lets go of its copies and opens afresh.
        for reader in list(self._readers):
            reader.abandon()
        if self._publisher is not None:
            self._publisher.close()
        self._forget()

    def _forget(self) -> None:
        self._readers = weakref.WeakSet()
        self._thread = threading.local()
        self._publisher = None
        self._state = None
        self._data = None


def _forget_inherited_slots() -> None:
    for sync in list(_open_synchronizers):
        sync._after_fork()


os.register_at_fork(after_in_child=_forget_inherited_slots)
