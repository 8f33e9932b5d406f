"""The embedded worker registry: the ``workers`` table of ``catalog.db`` (see ``workers.sql``).

It has a connection of its own to the catalog file, so the catalog's schema version and its
upgrades stay the catalog's business; the table is created in place when missing.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conveyor.engine.sqlfile import load_queries
from conveyor.engine.sqlite.storage import translate_error
from conveyor.engine.worker_rows import EXPIRY_MS, record_parameters, worker_from_row, worker_id_taken
from conveyor.model import WorkerEntry

Q = load_queries("conveyor.engine.sqlite", "workers.sql")


class WorkerRegistry:
    """Records, heartbeats and lists worker processes; every method is one short transaction."""

    def __init__(self, catalog_path: Path) -> None:
        self.path = catalog_path
        self._lock = threading.Lock()
        try:
            self._conn = sqlite3.connect(str(catalog_path), isolation_level=None, check_same_thread=False, timeout=60.0)
            self._conn.execute("PRAGMA synchronous = FULL")
            self._conn.execute(Q["create"])
        except sqlite3.Error as exc:
            raise translate_error(exc, str(catalog_path)) from None

    def record(self, entry: WorkerEntry, registered_by: str, now_ms: int) -> None:
        args = record_parameters(entry, registered_by, now_ms)
        with self._transaction() as conn:
            conn.execute(Q["prune"], {"cutoff": now_ms - EXPIRY_MS})
            if not conn.execute(Q["record"], args).rowcount:
                raise worker_id_taken(entry)

    def remove(self, worker_id: str, registered_by: str) -> None:
        with self._transaction() as conn:
            conn.execute(Q["remove"], {"worker": worker_id, "by": registered_by})

    def list(self, now_ms: int) -> list[WorkerEntry]:
        with self._transaction() as conn:
            conn.execute(Q["prune"], {"cutoff": now_ms - EXPIRY_MS})
            rows = conn.execute(Q["list"], {"cutoff": now_ms - EXPIRY_MS}).fetchall()
        return [worker_from_row(row) for row in rows]

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, rolled back on any error; SQLite's errors as Conveyor's."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self._conn
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise translate_error(exc, str(self.path)) from None

    def close(self) -> None:
        with self._lock:
            self._conn.close()
