"""Space set aside on the deployment's disk so that deleting and purging work when it is full.

On a full disk every SQLite commit fails, because it appends to a write-ahead log: deleting a
queue (a catalog commit, before its shard files are removed) and purging one (a shard commit, then
a checkpoint that gives the log's space back) fail too, so space could only be freed by hand. The
engine keeps a file of ``RESERVE_BYTES`` in the directory; when one of those operations finds the
disk full, the file is removed and the operation tried again, and it is made anew once there is room.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from conveyor.engine.sqlite.shard import PAGE_SIZE, WAL_AUTOCHECKPOINT
from conveyor.errors import InvalidSetting, StorageFull

log = logging.getLogger("conveyor.engine")
T = TypeVar("T")

# Enough for a purge's checkpoint to copy a full write-ahead log of distinct pages into the shard
# file (the log's space is given back only then), plus the commits of a delete or purge.
RESERVE_BYTES = WAL_AUTOCHECKPOINT * PAGE_SIZE + (1 << 20)
# Sets another size (0: none), say for a deployment on a small disk, or a test suite's many.
RESERVE_ENV = "CONVEYOR_RESERVE_BYTES"


def reserve_size() -> int:
    """The reserve's size: ``$CONVEYOR_RESERVE_BYTES`` if set, else :data:`RESERVE_BYTES`."""
    raw = os.environ.get(RESERVE_ENV)
    if raw is None:
        return RESERVE_BYTES
    if not (raw.isascii() and raw.isdigit()):
        raise InvalidSetting(f"{RESERVE_ENV} is {raw!r}; it must be a whole number of bytes (0 for no reserve)")
    return int(raw)


class SpaceReserve:
    """The reserve file of one deployment directory.

    >>> reserve = SpaceReserve(Path("/var/lib/conveyor/reserve"), RESERVE_BYTES)
    >>> reserve.restore()            # made if missing and there is room
    True
    >>> reserve.freeing(lambda: shard.purge())   # gives the reserve up if the disk is full
    """

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.size = size
        self._short = False  # logged that it could not be made, until it is made

    def restore(self) -> bool:
        """Make the reserve if it is missing; False if there is no room for it (yet)."""
        if not self.size:
            return True
        try:
            if self.path.stat().st_size >= self.size:
                return True
        except FileNotFoundError:
            pass
        partial = self.path.with_name(f"{self.path.name}.{os.getpid()}.partial")
        try:
            with partial.open("wb") as file:
                os.posix_fallocate(file.fileno(), 0, self.size)  # blocks of its own, not a sparse file
            partial.replace(self.path)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            if not self._short:
                self._short = True
                log.warning(
                    "cannot set %.1f MiB aside in %s (%s): deletes and purges may fail on a full disk",
                    self.size / 2**20,
                    self.path,
                    exc.strerror,
                )
            return False
        self._short = False
        return True

    def freeing(self, operation: Callable[[], T]) -> T:
        """Run an operation that frees space (a delete, a purge); if the disk is full, give the
        reserve up and run it again. The reserve is made anew afterwards, if there is room."""
        try:
            return operation()
        except StorageFull:
            if not self.path.exists():
                raise
            self.path.unlink()
            log.warning(
                "storage is full: gave up the %.1f MiB reserve %s so that a delete or purge can commit",
                self.size / 2**20,
                self.path,
            )
            return operation()
        finally:
            self.restore()
