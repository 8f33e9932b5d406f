"""The router: which shard files a queue has, open (which one a process writes to is the shared
policy's: ``ShardedEngine.home_shard``).

The shard map comes from the catalog snapshot (``snapshot/catalog_*``, published through mmapsync
after every catalog write: see ``snapshot_store.py``), a read of shared memory; cached maps are
dropped when its generation moves. ``catalog.db`` is read only when the snapshot is unusable or
lacks the queue. Shard objects (open connections) are kept across map refreshes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from conveyor.engine.sharded import ShardMap
from conveyor.engine.sqlite.catalog import Catalog
from conveyor.engine.sqlite.shard import Shard
from conveyor.engine.sqlite.snapshot import CatalogSnapshot
from conveyor.engine.sqlite.snapshot_store import SnapshotStore
from conveyor.errors import QueueNotFound, StorageError


class ShardRouter:
    """The shard files of every queue one engine has touched."""

    def __init__(self, directory: Path, catalog: Catalog, snapshots: SnapshotStore) -> None:
        self.directory = directory
        self.catalog = catalog
        self.snapshots = snapshots
        self._lock = threading.RLock()
        self._maps: dict[str, ShardMap[Shard]] = {}
        # Every shard object this engine opened, kept across shard-map refreshes.
        self._keep: dict[str, list[Shard]] = {}
        # The snapshot generation the cached shard maps were read at (None: read from the catalog).
        self._seen_generation: int | None = None

    def all(self, queue_id: str) -> list[Shard]:
        """Every shard of the queue (consumers read them all)."""
        return self.shard_map(queue_id).all

    def shard_map(self, queue_id: str) -> ShardMap[Shard]:
        """Every shard of the queue, and those that take writes."""
        snapshot = self._refresh()
        with self._lock:
            if queue_id in self._maps:
                return self._maps[queue_id]
        rows = self._shard_rows(queue_id, snapshot)
        with self._lock:
            if queue_id in self._maps:
                return self._maps[queue_id]
            known = {s.number: s for s in self._keep.get(queue_id, [])}
            try:
                for number, _ in rows:
                    if number not in known:
                        known[number] = self._open_shard(queue_id, number)
            finally:  # kept even when a later shard fails to open, so they are closed with the rest
                self._keep[queue_id] = list(known.values())
            shards = [known[number] for number, _ in rows]
            active = [s for s, (_, state) in zip(shards, rows, strict=True) if state == "active"]
            shard_map = ShardMap(shards, active)
            # Another thread may have seen a newer generation (and dropped the maps) since this one
            # read its snapshot: then these rows serve this call only.
            if snapshot is None or snapshot.generation == self._seen_generation:
                self._maps[queue_id] = shard_map
            return shard_map

    def make(self, queue_id: str, number: int) -> None:
        """Make a new shard's file now, so that one missing later is noticed."""
        self._open_shard(queue_id, number).close()

    def path(self, queue_id: str, number: int) -> Path:
        return self.directory / "shards" / f"{queue_id}.{number}.db"

    def forget(self) -> None:
        """Drop the cached shard maps (after this process changed queues or shards)."""
        with self._lock:
            self._maps.clear()

    def drop(self, queue_id: str) -> list[Shard]:
        """Forget a deleted queue; returns the shards opened for it (call :meth:`all` before the
        catalog forgets it), for the caller to close and remove."""
        with self._lock:
            self._maps.pop(queue_id, None)
            return self._keep.pop(queue_id, [])

    def close(self) -> None:
        with self._lock:
            for shards in self._keep.values():
                for shard in shards:
                    shard.close()
            self._keep.clear()
            self._maps.clear()

    def _refresh(self) -> CatalogSnapshot | None:
        """The catalog snapshot (``None``: read the catalog); drops cached shard maps when any
        process changed queues or shards since the last call."""
        snapshot = self.snapshots.current()
        if snapshot is None:
            changed = self.catalog.changed() or self._seen_generation is not None
            self._seen_generation = None
        else:
            changed = snapshot.generation != self._seen_generation
            self._seen_generation = snapshot.generation
        if changed:
            self.forget()
        return snapshot

    def _shard_rows(self, queue_id: str, snapshot: CatalogSnapshot | None) -> Sequence[tuple[int, str]]:
        """(shard number, state) of the queue's shards: from the snapshot, else from the catalog."""
        entry = snapshot.queues.get(queue_id) if snapshot is not None else None
        if entry is not None:
            return entry.shards
        rows = self.catalog.shards(queue_id)
        if not rows:
            raise QueueNotFound(f"queue {queue_id!r} does not exist")
        if snapshot is not None:  # it lacks a queue the catalog has: it is behind
            self.snapshots.publish()
        return rows

    def _open_shard(self, queue_id: str, number: int) -> Shard:
        """Open a shard's file, making it the first time; refuse to remake one that was deleted or
        emptied."""
        path = self.path(queue_id, number)
        made = self.catalog.materialized(queue_id, number)
        if not path.exists() and made:
            raise StorageError(
                f"shard file {path} of queue {queue_id} is missing: it was deleted or moved, and its messages "
                "with it; restore the file (with its -wal) to go on, or delete the queue with "
                "`conveyor queues delete --force`"
            )
        shard = Shard(path, number, made=made)
        if not made:  # also a file whose maker died before marking it
            self.catalog.mark_materialized(queue_id, number)
        return shard
