"""``FeatureStore``: u64 key → fixed-length float32 vector, an open-addressing table in the data file.

Data file layout (one published version)::

    offset  size  field
         0     8  magic b"CVYFEAT1"
         8     4  layout version (1)
        12     4  dim: floats per vector
        16     8  count: keys
        24     8  capacity: table entries, a power of two at least twice the count
        32    32  reserved, zero
        64     .  entries: capacity × (u64 key, u64 row + 1); row 0 marks an empty entry
             .    values: count × dim little-endian float32, 64-byte aligned, row i for keys[i]

Keys hash with the splitmix64 finalizer and probe linearly; at most half the entries are used, so a
miss ends after a couple of probes. Keys and rows share an entry, so a hit costs one cache line
before the vector itself.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Final, SupportsIndex

from conveyor.extras import MissingExtra

try:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray
except ModuleNotFoundError as missing:
    if missing.name != "numpy":
        raise
    raise MissingExtra("conveyor.mmapsync.FeatureStore", "features", ["numpy"]) from None

from conveyor.mmapsync import _native  # noqa: F401  (refuses a missing or stale _atomics, saying why)
from conveyor.mmapsync._atomics import Table, build_table
from conveyor.mmapsync.errors import DuplicateKey, ForeignFile, TruncatedFile
from conveyor.mmapsync.layout import DEFAULT_SLOTS, Version
from conveyor.mmapsync.synchronizer import DEFAULT_GRACE, Synchronizer

MAGIC: Final = b"CVYFEAT1"
LAYOUT_VERSION: Final = 1
HEADER: Final = struct.Struct("<8sIIQQ32x")
ENTRY_SIZE: Final = 16
FLOAT32: Final = np.dtype("<f4")
Vectors = NDArray[np.float32]


def _capacity(count: int) -> int:
    return max(8, 1 << (2 * count - 1).bit_length())


def _values_offset(capacity: int) -> int:
    end_of_entries = HEADER.size + capacity * ENTRY_SIZE
    return -(-end_of_entries // 64) * 64


class FeatureTable:
    """One published version of a FeatureStore, valid while the read that yielded it is held.

    Every vector it returns is a read-only view into the mapped file: no bytes are copied.
    """

    __slots__ = ("_find", "_table", "count", "dim", "values")

    def __init__(self, table: Table, values: Vectors) -> None:
        self._table = table
        self._find = table.find
        self.values = values
        """All vectors, ``(count, dim)``, row ``i`` belonging to the ``i``-th published key."""
        self.count, self.dim = int(values.shape[0]), int(values.shape[1])

    @classmethod
    def decode(cls, data: memoryview) -> FeatureTable:
        """Interpret one published data file, refusing foreign or truncated ones."""
        if len(data) < HEADER.size:
            raise TruncatedFile(f"feature table of {len(data)} bytes is shorter than its header")
        magic, layout, dim, count, capacity = HEADER.unpack_from(data)
        if magic != MAGIC or layout != LAYOUT_VERSION:
            raise ForeignFile(f"published data is not a FeatureStore table (magic {magic!r}, layout {layout})")
        if capacity != _capacity(count):
            raise ForeignFile(f"feature table header is inconsistent: {count} keys in {capacity} entries")
        start = _values_offset(capacity)
        end = start + count * dim * FLOAT32.itemsize
        if len(data) < end:
            raise TruncatedFile(f"feature table needs {end} bytes, the published data has {len(data)}")
        table = Table(data[HEADER.size : HEADER.size + capacity * ENTRY_SIZE])
        values = np.frombuffer(data, dtype=FLOAT32, count=count * dim, offset=start).reshape(count, dim)
        return cls(table, values)

    def get(self, key: SupportsIndex) -> Vectors:
        """The vector of ``key`` (an ``int`` or NumPy integer) as a view, or ``KeyError``."""
        row = self._find(key)
        if row < 0:
            raise KeyError(key)
        vector: Vectors = self.values[row]
        return vector

    __getitem__ = get

    def __contains__(self, key: SupportsIndex) -> bool:
        return self._find(key) >= 0

    def __len__(self) -> int:
        return self.count

    def rows(self, keys: ArrayLike) -> NDArray[np.int64]:
        """Row in :attr:`values` of each key, ``-1`` for a missing one: a batch lookup with no copy."""
        wanted = np.ascontiguousarray(keys, dtype=np.uint64)
        rows = np.empty(wanted.shape, dtype=np.int64)
        self._table.find_many(wanted, rows)
        return rows

    def get_many(self, keys: ArrayLike) -> list[Vectors]:
        """A view of each key's vector, in order; ``KeyError`` names the first missing key."""
        values = self.values
        return [values[row] for row in self._rows_of_present(keys).tolist()]

    def take(self, keys: ArrayLike, out: Vectors | None = None) -> Vectors:
        """The keys' vectors gathered into one ``(n, dim)`` array (a copy: the input of a model)."""
        return np.take(self.values, self._rows_of_present(keys), axis=0, out=out)

    def _rows_of_present(self, keys: ArrayLike) -> NDArray[np.int64]:
        rows = self.rows(keys)
        if rows.size and rows.min() < 0:
            raise KeyError(int(np.asarray(keys, dtype=np.uint64).ravel()[int(np.argmin(rows))]))
        return rows


class FeatureStore:
    """u64 key → float32 vector of a fixed length, published as a whole and read without copies.

    >>> store = FeatureStore("/dev/shm/features")
    >>> store.publish(keys=[7, 42], vectors=[[0.5, 1.0], [2.0, 4.0]])
    Version(index=1, size=208, checksum=15926136)
    >>> with store.read() as table:
    ...     table[42], table.take([42, 7]).shape
    (array([2., 4.], dtype=float32), (2, 2))
    """

    def __init__(self, prefix: str | Path, *, slots: int = DEFAULT_SLOTS) -> None:
        self._sync = Synchronizer(prefix, decode=FeatureTable.decode, slots=slots)

    def read(self) -> AbstractContextManager[FeatureTable]:
        """Pin the published table for the ``with`` block (see :meth:`Synchronizer.read`)."""
        return self._sync.read()

    def publish(self, keys: ArrayLike, vectors: ArrayLike, *, grace: float = DEFAULT_GRACE) -> Version:
        """Publish ``vectors[i]`` for ``keys[i]`` as the next table; raises :class:`DuplicateKey`."""
        matrix = np.asarray(vectors, dtype=FLOAT32)
        if matrix.ndim != 2:
            raise ValueError(f"vectors must be a (keys, dim) matrix, not shape {matrix.shape}")
        with self.publishing(keys, matrix.shape[1], grace=grace) as values:
            values[:] = matrix
        return self._sync.last_published()

    @contextmanager
    def publishing(self, keys: ArrayLike, dim: int, *, grace: float = DEFAULT_GRACE) -> Iterator[Vectors]:
        """Lay out the table for ``keys`` in the idle data file and yield its ``(len(keys), dim)``
        vectors to fill in place; the table is published when the block ends, or not at all if it
        raises. Builds tens of millions of keys without a second copy of the vectors in memory.
        """
        ordered = np.ascontiguousarray(keys, dtype=np.uint64)
        if ordered.ndim != 1:
            raise ValueError(f"keys must be one-dimensional, not shape {ordered.shape}")
        count, capacity = len(ordered), _capacity(len(ordered))
        start = _values_offset(capacity)
        with self._sync.writing(start + count * dim * FLOAT32.itemsize, grace=grace) as data:
            np.frombuffer(data, dtype=np.uint8, count=start)[:] = 0  # the idle file holds an older table
            HEADER.pack_into(data, 0, MAGIC, LAYOUT_VERSION, dim, count, capacity)
            duplicate = build_table(data[HEADER.size : HEADER.size + capacity * ENTRY_SIZE], ordered)
            if duplicate >= 0:
                raise DuplicateKey(f"key {int(ordered[duplicate])} appears more than once")
            values = np.frombuffer(data, dtype=FLOAT32, count=count * dim, offset=start)
            yield values.reshape(count, dim)

    def version(self) -> Version:
        """The version published now."""
        return self._sync.version()

    def close(self) -> None:
        """Give back the reader slot and descriptors."""
        self._sync.close()
