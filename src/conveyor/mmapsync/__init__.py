"""A wait-free memory-mapped store for read-heavy shared state, after Cloudflare's mmap-sync.

One writer process publishes a new version of a data set; any number of reader processes read the
current version in place, through a zero-copy ``memoryview``, without ever waiting for a lock.

>>> import json
>>> from conveyor.mmapsync import Synchronizer
>>> Synchronizer("/dev/shm/shard-map").write(b'{"shards": 8}')
Version(index=1, size=13, checksum=6305564)
>>> shard_map = Synchronizer("/dev/shm/shard-map", decode=lambda data: json.loads(bytes(data)))
>>> with shard_map.read() as settings:  # decoded once per published version, then cached
...     settings["shards"]
8

``FeatureStore`` maps u64 keys to float32 vectors on top of it.

Files
=====
``PREFIX_data_0`` and ``PREFIX_data_1`` hold two versions; ``PREFIX_state`` holds the 64-bit version
word of the published format (bit 0 the active data file, bits 1-39 the size, bits 40-63 a 24-bit
checksum) followed by a table of reader slots (``layout.py`` has the byte map). The writer fills the
file no reader is using, waits for that file's readers to leave, and swaps the version word.

Atomics
=======
The words shared between processes are only ever touched by ``__atomic`` builtins (sequentially
consistent loads, stores and adds) in a small C helper, ``_atomics.c``, compiled when the package is
built or installed (``hatch_build.py``; a platform wheel) with ``$CC`` or the compiler CPython was
built with. Built there rather than on first import, a library runs no compiler and writes nothing
into its user's home when imported; ``_native.py`` refuses a missing helper (a package built without
a compiler) or a stale one (an editable install whose C source changed) with
:class:`NativeBuildError`. Why not the alternatives: the ``atomics`` package, cffi and ctypes offer
one operation per call, so a read (load, store, load, then store again) would pay Python call
overhead four times over plus the glue between, where the 1.5 µs budget for acquire, look up and
release wants one call each way. Here ``Pin.__enter__`` pins, re-checks and returns the cached view
in one C call and ``__exit__`` unpins in another (benchmarks/README.md has what that costs).

Reading (fixes the stale-pin race)
==================================
A reader loads the version word, pins the file it names by storing 1 or 2 in its own slot, then loads
the word again and starts over if it moved. The writer swaps the word *before* it looks at the
slots. Both sides use sequentially consistent operations, so either the reader's second load sees the
writer's swap (it retries) or the writer's scan sees the reader's pin (the writer waits): a reader that
stalled between loading the word and pinning, while two writes went by, can no longer read a file
being rewritten.

Crash recovery (why no count is ever corrupted)
===============================================
The published design keeps one shared reader counter per data file and, after a grace period, forces
a stuck counter to zero; a reader that was merely slow then decrements it below zero (it wraps) and the
writer takes the file from under the next readers. No shared counter can be repaired safely, because
nothing says which of its increments belong to the dead.

Here the counters are replaced by per-reader slots, which are that ownership: the "count" of readers on
a file is the number of live slots pinning it. A reader claims a slot once, by taking an exclusive
open-file-description lock (``F_OFD_SETLK``) on the slot's byte range of the state file through a
descriptor of its own, and only that reader ever writes the slot's pin. The kernel releases the lock
when the last descriptor of that open file description closes, which includes every way a process can
die, SIGKILL too. When the writer finds a slot pinning the file it wants, it asks the kernel whether
the slot's range is locked (``F_OFD_GETLK``): locked means a live reader (wait for it, up to ``grace``),
unlocked means its owner is gone and the pin is a leftover, which the writer ignores. The writer never
writes to a slot, so it cannot disturb a live reader's state; a new reader that claims a dead slot
clears the leftover pin before its first read. Lock ownership is exact where process ids are not: no
pid reuse can make a dead reader look alive or a live one look dead. A live reader that holds the file
past ``grace`` is never overridden either: the write raises :class:`ReadersStillActive` and publishes
nothing. A forked child lets go of the slots it inherited (``os.register_at_fork``) and claims its own.

The two 32-bit counters at offset 8 of the published state file are therefore gone; their place holds a
magic number, so foreign files are refused and tools written for the published format see non-zero
"counters" and do not overwrite our data.

Limits
======
Linux 3.15 or later (open-file-description locks); a C compiler and Python's headers when the package
is built or installed. Readers open the state file read-write, to pin. Data files only grow, so a stale mapping never
points past the end of its file; a file cut short by something else is refused when mapped
(:class:`TruncatedFile`), but cutting one under a live mapping ends that reader with SIGBUS, as with
any mmap. Nothing is fsynced: the store is for state that a writer can republish, on tmpfs by choice.
"""

from typing import TYPE_CHECKING, Any

from conveyor.mmapsync.errors import (
    DataSetNotFound,
    DuplicateKey,
    ForeignFile,
    NativeBuildError,
    NothingPublished,
    ReadersStillActive,
    TooManyReaders,
    TruncatedFile,
)
from conveyor.mmapsync.layout import Version, checksum
from conveyor.mmapsync.synchronizer import Synchronizer

if TYPE_CHECKING:
    from conveyor.mmapsync.feature_store import FeatureStore, FeatureTable


def __getattr__(name: str) -> Any:
    # FeatureStore needs NumPy, whose import costs ~0.1 s: the queues' own use of the Synchronizer
    # (the catalog snapshot, imported by every CLI call) should not pay for it.
    if name in ("FeatureStore", "FeatureTable"):
        from conveyor.mmapsync import feature_store

        return getattr(feature_store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DataSetNotFound",
    "DuplicateKey",
    "FeatureStore",
    "FeatureTable",
    "ForeignFile",
    "NativeBuildError",
    "NothingPublished",
    "ReadersStillActive",
    "Synchronizer",
    "TooManyReaders",
    "TruncatedFile",
    "Version",
    "checksum",
]
