"""The on-disk format: file names, the state file's header and slot table, the version word.

State file (``PREFIX_state``)::

    offset  size  field
         0     8  version word: bit 0 active data file, bits 1-39 data size, bits 40-63 checksum
         8     8  magic b"CVYMSYNC" (where the published format keeps its two reader counters)
        16     4  layout version (1)
        20     4  slot count
        24     8  publications: how many versions were ever published (only grows)
        32    32  reserved, zero
        64     .  slot table: one 64-byte cache line per reader slot; its first 8 bytes are the pin
                  (0 = idle, 1 = reading data_0, 2 = reading data_1)

All integers are little-endian; the words are accessed only through the atomics helper.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

MAGIC: Final = b"CVYMSYNC"
LAYOUT_VERSION: Final = 1
WORD_OFFSET: Final = 0
PUBLICATIONS_OFFSET: Final = 24
HEADER_SIZE: Final = 64
SLOT_SIZE: Final = 64
DEFAULT_SLOTS: Final = 1024
WRITER_LOCK: Final = (0, 8)
"""Byte range of the state file that a writer locks for the whole of one publication."""

HEADER: Final = struct.Struct("<Q8sIIQ32x")
MAX_SIZE: Final = (1 << 39) - 1
CHECKSUM_BITS: Final = 24


def state_path(prefix: str | Path) -> Path:
    """``PREFIX_state``: the version word and the reader slots."""
    return Path(f"{prefix}_state")


def data_path(prefix: str | Path, index: int) -> Path:
    """``PREFIX_data_0`` or ``PREFIX_data_1``."""
    return Path(f"{prefix}_data_{index}")


def state_size(slots: int) -> int:
    """Bytes in a state file with ``slots`` reader slots."""
    return HEADER_SIZE + slots * SLOT_SIZE


def slot_offset(slot: int) -> int:
    """Byte offset of a slot's pin word, also the start of the byte range its owner locks."""
    return HEADER_SIZE + slot * SLOT_SIZE


def checksum(data: bytes | memoryview) -> int:
    """The 24-bit checksum the version word carries: the low 24 bits of CRC-32.

    >>> checksum(b"features")
    12639251
    """
    return zlib.crc32(data) & ((1 << CHECKSUM_BITS) - 1)


@dataclass(frozen=True, slots=True)
class Version:
    """One published version, decoded from the 64-bit version word.

    >>> Version.unpack(Version(index=1, size=5, checksum=7).word)
    Version(index=1, size=5, checksum=7)
    """

    index: int
    size: int
    checksum: int

    @property
    def word(self) -> int:
        """The packed 64-bit word as it sits at offset 0 of the state file."""
        return self.index | self.size << 1 | self.checksum << 40

    @classmethod
    def unpack(cls, word: int) -> Version:
        """Decode a version word."""
        return cls(index=word & 1, size=(word >> 1) & MAX_SIZE, checksum=word >> 40)
