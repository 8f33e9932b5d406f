"""Where a force-deleted queue's damaged shard files go: ``damaged/`` in the deployment directory,
kept for inspection (or for a recovery tool) instead of being removed with the queue."""

from __future__ import annotations

import os
import time
from pathlib import Path

DAMAGED_DIR = "damaged"
SHARD_FILE_SUFFIXES = ("", "-wal", "-shm")


def keep_aside(directory: Path, shard_file: Path) -> list[str]:
    """Move a shard file and its -wal and -shm, those that exist, into ``directory/damaged/``,
    named with the time of the move; returns their new paths relative to ``directory``.

    >>> keep_aside(Path("/var/lib/conveyor"), Path("/var/lib/conveyor/shards/ab12.0.db"))
    ['damaged/20261201T193000Z-ab12.0.db', 'damaged/20261201T193000Z-ab12.0.db-wal']
    """
    target = directory / DAMAGED_DIR
    target.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    moved: list[str] = []
    for suffix in SHARD_FILE_SUFFIXES:
        source = Path(f"{shard_file}{suffix}")
        if not source.exists():
            continue
        destination = target / f"{stamp}-{shard_file.name}{suffix}"
        os.replace(source, destination)  # a rename in the same file system: needs no free space
        moved.append(str(destination.relative_to(directory)))
    return moved
