"""What a job does with one object, decided the same way by the transfer consumer and by a dry
run (:meth:`conveyor.slurper.Slurper.plan`): skip it and say why (Cloudflare's log types), or copy
it; and whether an object the target holds differs from the source's.

>>> skip_reason("photos/", 0, "STANDARD", MAX_OBJECT_BYTES)
('importSkippedEmptyObject', "an empty object whose key ends in '/' (a folder marker)")
"""

from __future__ import annotations

import re
import threading
import time

from conveyor.slurper.endpoints import Existing

MAX_OBJECT_BYTES = 1 << 40  # Cloudflare skips objects over 1 TB
# Storage classes whose objects must be restored before they can be read.
COLD_STORAGE_CLASSES = frozenset({"GLACIER", "DEEP_ARCHIVE"})
MD5 = re.compile(r"^[0-9a-f]{32}\Z")


def skip_reason(key: str, size: int, storage_class: str, max_bytes: int) -> tuple[str, str] | None:
    """The log type and message of an object a job skips, or None to copy it (``size`` -1: not
    known until it is read)."""
    if storage_class in COLD_STORAGE_CLASSES:
        return "importSkippedStorageClass", f"storage class {storage_class} needs a restore before it can be read"
    if size > max_bytes:
        return "importSkippedOversized", f"{size} bytes is over the limit of {max_bytes}"
    if size == 0 and key.endswith("/"):
        return "importSkippedEmptyObject", "an empty object whose key ends in '/' (a folder marker)"
    return None


def changed(existing: Existing, size: int, etag: str) -> bool:
    """Whether the source's object differs from the target's (skip-existing copies it again): by
    size, and by MD5 where both sides give one. A key of a ``keys`` list (size -1, unknown until
    read) counts as unchanged."""
    if size < 0:
        return False
    if existing.size != size:
        return True
    return bool(MD5.match(existing.md5) and MD5.match(etag) and existing.md5 != etag)


class ByteRate:
    """At most ``per_second`` bytes a second through :meth:`take`, shared by a process's threads
    (a worker's ``max_bytes_per_second``): each caller waits its turn."""

    def __init__(self, per_second: int) -> None:
        self.per_second = per_second
        self._next = time.monotonic()
        self._lock = threading.Lock()

    def take(self, size: int) -> None:
        with self._lock:
            now = time.monotonic()
            start = max(self._next, now)
            self._next = start + size / self.per_second
        if start > now:
            time.sleep(start - now)
