"""Keeping freed memory in the process instead of handing it back to the kernel batch after batch.

glibc's malloc returns the free memory at the top of its heap to the kernel whenever more than
``M_TRIM_THRESHOLD`` (128 KiB) lies there. Conveyor's hot paths allocate and free about that much per
batch: a hundred 1 KB bodies encoded for a ``send_batch``, or fetched for a delivery. So every batch
gave its memory back and page-faulted it in again on the next one, which cost more than the encoding
itself (benchmarks/README.md has the figures). :func:`keep_freed_memory` raises the threshold
to 32 MiB for the process, once, and keeps blocks under 4 MiB on the heap (setting a threshold
switches off glibc's own adjustment of where ``mmap`` begins). Elsewhere than glibc, or with
``CONVEYOR_MALLOC=default`` in the environment, nothing is changed.

That is a setting of the whole process, so it is an opt-in: Conveyor's own processes take it (every
``conveyor`` command, ``conveyor worker`` and ``conveyor serve`` among them, and the benchmarks);
:func:`conveyor.connect` does not, and an application that embeds Conveyor calls
``conveyor.keep_freed_memory()`` itself if it wants the same.
"""

from __future__ import annotations

import ctypes
import os
import platform

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
TRIM_THRESHOLD_BYTES = 32 * 1024 * 1024
MMAP_THRESHOLD_BYTES = 4 * 1024 * 1024

_tuned: bool | None = None


def keep_freed_memory() -> bool:
    """Keep freed memory in this process instead of returning it to the kernel after every batch
    (glibc's trim and mmap thresholds, see :mod:`conveyor.allocator`); whether malloc is now tuned.
    Once per process; later calls change nothing.

    >>> import conveyor
    >>> conveyor.keep_freed_memory()   # at start-up, before sending or consuming in bulk
    True
    """
    global _tuned
    if _tuned is None:
        _tuned = False
        if os.environ.get("CONVEYOR_MALLOC") != "default" and platform.libc_ver()[0] == "glibc":
            mallopt = ctypes.CDLL(None).mallopt
            _tuned = (
                mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
                and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1
            )
    return _tuned


def is_tuned() -> bool:
    """Whether this process opted in (:func:`keep_freed_memory`) and glibc's malloc was tuned."""
    return bool(_tuned)
