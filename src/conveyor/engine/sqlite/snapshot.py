"""The catalog snapshot: every queue's settings and shard map at one catalog generation, as bytes.

Producers and consumers read it on every send and lease (``snapshot_store.py`` publishes it through
mmapsync), so it holds only what those paths need and decodes once per published version.

Encoding: an 8-byte header (magic ``CVCS``, CRC-32 of the payload, little-endian) and compact JSON::

    {"generation": 7, "queues": {"QUEUE_ID": ["name", delay, paused, retention, [[0, "active"], ...]]}}

The CRC is checked on decoding, so a damaged file is refused (:class:`CorruptSnapshot`) rather than
read as plausible settings.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from conveyor.errors import CorruptStorage
from conveyor.model import QueueSettings

MAGIC: Final = b"CVCS"
HEADER: Final = struct.Struct("<4sI")

Shard = tuple[int, str]  # (shard number, state: 'active' or 'draining')


class CorruptSnapshot(CorruptStorage):
    """The published snapshot's bytes are not a catalog snapshot (bad magic, checksum or shape)."""


@dataclass(frozen=True, slots=True)
class QueueEntry:
    """One queue as producers and consumers need it."""

    name: str
    settings: QueueSettings
    shards: tuple[Shard, ...]


@dataclass(frozen=True, slots=True)
class CatalogSnapshot:
    """The catalog's queues at ``generation`` (the ``catalog_generation`` sequence it reflects).

    >>> snapshot = decode(memoryview(encode(CatalogSnapshot(3, {}))))
    >>> snapshot.generation
    3
    """

    generation: int
    queues: Mapping[str, QueueEntry]


def encode(snapshot: CatalogSnapshot) -> bytes:
    """The snapshot's published bytes."""
    queues = {
        queue_id: [
            entry.name,
            entry.settings.delivery_delay,
            entry.settings.delivery_paused,
            entry.settings.message_retention_period,
            [list(shard) for shard in entry.shards],
        ]
        for queue_id, entry in snapshot.queues.items()
    }
    payload = json.dumps({"generation": snapshot.generation, "queues": queues}, separators=(",", ":")).encode()
    return HEADER.pack(MAGIC, zlib.crc32(payload)) + payload


def decode(data: memoryview) -> CatalogSnapshot:
    """Parse published bytes; :class:`CorruptSnapshot` if they are damaged."""
    if len(data) < HEADER.size:
        raise CorruptSnapshot(f"catalog snapshot is {len(data)} bytes, shorter than its {HEADER.size}-byte header")
    magic, crc = HEADER.unpack(data[: HEADER.size])
    payload = bytes(data[HEADER.size :])
    if magic != MAGIC or zlib.crc32(payload) != crc:
        raise CorruptSnapshot("catalog snapshot fails its magic or checksum check")
    try:
        raw: Any = json.loads(payload)
        queues = {
            queue_id: QueueEntry(
                name,
                QueueSettings(int(delay), bool(paused), int(retention)),
                tuple((int(number), str(state)) for number, state in shards),
            )
            for queue_id, (name, delay, paused, retention, shards) in raw["queues"].items()
        }
        return CatalogSnapshot(int(raw["generation"]), queues)
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptSnapshot(f"catalog snapshot has an unexpected shape: {exc}") from None
