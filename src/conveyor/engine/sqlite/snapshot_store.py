"""Publishing the catalog snapshot through mmapsync, and reading it on the hot path.

Every process that opens a data directory reads ``snapshot/catalog_*`` (an mmapsync data set) instead
of querying ``catalog.db`` on each send and lease: a read pins the published version and returns the
snapshot decoded once per version, in well under a microsecond.

Publishing: each catalog write republishes after its commit. A publisher builds the snapshot from a
catalog read, then, holding mmapsync's writer lock, reads the catalog's generation afresh and writes
only if its snapshot is that generation and the published one is not: a slow publisher whose snapshot
another write has overtaken builds again instead, so no publisher ever replaces a newer snapshot with
an older one. (Comparing with the catalog rather than with the published generation also replaces a
snapshot left by another history of ``catalog.db``, say one restored from a backup.) A process that
dies between commit and publish leaves the snapshot behind the catalog; :meth:`SnapshotStore.refresh`
(on engine open, and every few seconds from the coordinator) republishes it.

Failures fall back to the catalog, never to wrong answers: when the snapshot cannot be read or
published (missing, damaged, no reader slot left, no C compiler for mmapsync),
:meth:`~SnapshotStore.current` returns ``None`` and the engine reads ``catalog.db``; the store logs the
first failure of each kind and rebuilds the snapshot, at once and then every ``REPAIR_RETRY_SECONDS``
while that fails. A state file too damaged to open is replaced under an exclusive lock on
``catalog.lock``; publishers take it shared, and every process checks about once a second that the
files it mapped are still the ones at the path, so none keeps reading a replaced (orphaned) file.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final, Protocol

from conveyor.engine.sqlite.snapshot import CatalogSnapshot, decode, encode
from conveyor.errors import ConveyorError

try:
    from conveyor.mmapsync import ForeignFile, Synchronizer, TruncatedFile

    UNAVAILABLE = ""
except ConveyorError as exc:  # the atomics helper could not be built: run on the catalog alone
    UNAVAILABLE = str(exc)

log = logging.getLogger("conveyor.engine")

# How often a process checks that its mapped files are still the ones at the path.
IDENTITY_CHECK_SECONDS: Final = 1.0
# How often a store that cannot read or publish its snapshot tries to rebuild it.
REPAIR_RETRY_SECONDS: Final = 1.0
# How long a publisher waits for live readers of the idle file; reads hold it for nanoseconds.
PUBLISH_GRACE_SECONDS: Final = 0.5
# How many times a publisher overtaken by concurrent catalog writes builds its snapshot again (the
# writers that overtook it publish too; this only spares its own readers a stale moment).
PUBLISH_ATTEMPTS: Final = 3
SNAPSHOT_ERRORS: Final = (ConveyorError, OSError)

FileIdentity = tuple[int, int]


class SnapshotSource(Protocol):
    """Where snapshots come from (the catalog)."""

    def generation(self) -> int: ...

    def snapshot(self) -> CatalogSnapshot: ...


class _AlreadyPublished(Exception):
    """Raised inside the writer's critical section: the catalog's generation is published already."""


class _Overtaken(Exception):
    """Raised inside the writer's critical section: the catalog changed since the snapshot was built."""


class SnapshotStore:
    """The catalog snapshot at ``prefix`` (``PREFIX_state``, ``PREFIX_data_0``, ``PREFIX_data_1``).

    >>> store = SnapshotStore(Path("/var/lib/conveyor/snapshot/catalog"), catalog)
    >>> store.publish()
    True
    >>> store.current().queues["QUEUE_ID"].settings.delivery_delay
    0
    """

    def __init__(self, prefix: Path, source: SnapshotSource) -> None:
        self.prefix = prefix
        self._source = source
        self._state_path = Path(f"{prefix}_state")
        self._lock_path = Path(f"{prefix}.lock")
        self._reader: Synchronizer[CatalogSnapshot] | None = None
        self._writer: Synchronizer[CatalogSnapshot] | None = None
        self._identity: FileIdentity | None = None
        self._check_at = 0.0
        self._checking = threading.Lock()
        self._publishing = threading.Lock()
        self._logged: set[str] = set()
        if UNAVAILABLE:
            log.warning("catalog snapshot disabled, reading the catalog instead: %s", UNAVAILABLE)
            self._check_at = float("inf")
            return
        prefix.parent.mkdir(parents=True, exist_ok=True)

    # -- reading ------------------------------------------------------------------------------
    def current(self) -> CatalogSnapshot | None:
        """The published snapshot, or ``None`` when it is unusable (read the catalog instead)."""
        if time.monotonic() >= self._check_at:
            self._check()
        snapshot = self._read()
        if snapshot is None and self._check_at == 0.0:  # a new kind of failure: rebuild at once
            self._check()
            snapshot = self._read()
        return snapshot

    def _read(self) -> CatalogSnapshot | None:
        reader = self._reader
        if reader is None:
            return None
        try:
            with reader.read() as snapshot:
                return snapshot
        except SNAPSHOT_ERRORS as exc:
            self._fail("cannot read the catalog snapshot", exc)
            return None

    def _check(self) -> None:
        """Rebuild a failed snapshot, or reopen one whose files were replaced by another process."""
        if not self._checking.acquire(blocking=False):
            return  # another thread is at it
        try:
            if self._reader is None:
                repaired = self.repair()
                self._check_at = time.monotonic() + (IDENTITY_CHECK_SECONDS if repaired else REPAIR_RETRY_SECONDS)
                return
            self._check_at = time.monotonic() + IDENTITY_CHECK_SECONDS
            if _identity(self._state_path) != self._identity:
                with self._publishing:
                    self._open()
        except SNAPSHOT_ERRORS as exc:
            self._fail("cannot reopen the catalog snapshot", exc)
        finally:
            self._checking.release()

    # -- publishing ---------------------------------------------------------------------------
    def publish(self) -> bool:
        """Publish the catalog as it is now, unless that is what is published; True if it wrote."""
        if UNAVAILABLE:
            return False
        try:
            with self._publishing, self._files(fcntl.LOCK_SH):
                if self._reader is None or self._writer is None or _identity(self._state_path) != self._identity:
                    self._open()
                return self._write()
        except SNAPSHOT_ERRORS as exc:
            self._fail("cannot publish the catalog snapshot", exc)
            return False

    def refresh(self) -> bool:
        """Republish if the snapshot is missing, damaged or behind the catalog; True if it wrote."""
        if UNAVAILABLE:
            return False
        if self._reader is None:
            return self.repair()
        current = self.current()
        if current is not None and current.generation == self._source.generation():
            return False
        return self.publish()

    def repair(self) -> bool:
        """Reopen the files and republish, replacing a state file too damaged to open; True on success."""
        if UNAVAILABLE:
            return False
        try:
            with self._publishing, self._files(fcntl.LOCK_EX):
                try:
                    self._open()
                    self._write()
                except (ForeignFile, TruncatedFile) as exc:
                    log.warning("replacing the damaged catalog snapshot %s: %s", self.prefix, exc)
                    self._remove_files()
                    self._open()
                    self._write()
        except SNAPSHOT_ERRORS as exc:
            self._fail("cannot rebuild the catalog snapshot", exc)
            return False
        self._check_at = time.monotonic() + IDENTITY_CHECK_SECONDS
        if self._logged:
            log.info("catalog snapshot %s rebuilt", self.prefix)
        return True

    def _write(self) -> bool:
        """Publish the catalog's current generation unless it is published (holding ``_publishing``)."""
        assert self._writer is not None
        for _ in range(PUBLISH_ATTEMPTS):
            snapshot = self._source.snapshot()
            data = encode(snapshot)
            try:
                with self._writer.writing(len(data), grace=PUBLISH_GRACE_SECONDS) as target:
                    # Under mmapsync's writer lock no other process publishes until the block ends.
                    latest = self._source.generation()
                    if latest != snapshot.generation:
                        raise _Overtaken
                    if self._published_generation() == latest:
                        raise _AlreadyPublished
                    target[:] = data
            except _Overtaken:
                continue
            except _AlreadyPublished:
                return False
            if self._identity is None:  # the files were created by this write
                self._identity = _identity(self._state_path)
            return True
        return False

    def _published_generation(self) -> int:
        if self._reader is None:
            return -1
        try:
            with self._reader.read() as published:
                return published.generation
        except SNAPSHOT_ERRORS:
            return -1  # nothing (readable) published: anything is newer

    # -- files --------------------------------------------------------------------------------
    def _open(self) -> None:
        """Use the files now at the prefix (mmapsync maps them, creating missing ones, on first use)."""
        if self._writer is not None:
            self._writer.close()
        self._identity = _identity(self._state_path)
        self._writer = Synchronizer(self.prefix, decode=decode)
        # Other threads may be mid-read through the old reader: it goes with its last reference
        # instead of being closed under them.
        self._reader = Synchronizer(self.prefix, decode=decode)

    def _remove_files(self) -> None:
        for path in (self._state_path, Path(f"{self.prefix}_data_0"), Path(f"{self.prefix}_data_1")):
            path.unlink(missing_ok=True)

    @contextmanager
    def _files(self, mode: int) -> Iterator[None]:
        """Hold ``catalog.lock``: shared to publish, exclusive to replace the files."""
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, mode)
            yield
        finally:
            os.close(fd)

    def _fail(self, what: str, exc: BaseException) -> None:
        """Read the catalog until the snapshot is rebuilt: on the next read the first time a failure
        of this kind is seen (and logged), every ``REPAIR_RETRY_SECONDS`` after that."""
        self._reader = None
        kind = type(exc).__name__
        if kind in self._logged:
            self._check_at = time.monotonic() + REPAIR_RETRY_SECONDS
            return
        self._logged.add(kind)
        self._check_at = 0.0
        log.warning("%s %s (%s); reading the catalog until it is rebuilt", what, self.prefix, exc)

    def close(self) -> None:
        """Let go of the mapped files."""
        with self._publishing:
            if self._writer is not None:
                self._writer.close()
            reader, self._reader, self._writer = self._reader, None, None
        if reader is not None:
            with suppress(RuntimeError):  # a read still held in another thread
                reader.close()


def _identity(path: Path) -> FileIdentity | None:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino
