"""KV namespaces of a SQLite deployment: the file ``kv.db`` in its directory (schema in ``kv_sqlite.sql``).

Every commit is fsynced before it returns (``open_database``: WAL, ``synchronous=FULL``). One
connection serves the store's threads, behind a lock; other processes of the deployment share the
file through SQLite's own locking (writes take the write lock at ``BEGIN IMMEDIATE``).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from conveyor.engine.base import Clock
from conveyor.engine.sqlfile import load_queries
from conveyor.engine.sqlite.storage import ensure_directory, open_database, translate_error
from conveyor.storage.kv_sql import Row, Run, SQLKVStore

T = TypeVar("T")
Q = load_queries("conveyor.storage", "kv_sqlite.sql")
FILE_NAME = "kv.db"
SCHEMA_VERSION = 1


class SQLiteKVStore(SQLKVStore):
    def __init__(self, directory: str, clock: Clock) -> None:
        self.clock = clock
        ensure_directory(Path(directory))
        self.path = Path(directory) / FILE_NAME
        self._conn = open_database(self.path, Q["schema"], version=SCHEMA_VERSION)
        self._lock = threading.Lock()

    def _run(self, name: str, params: dict[str, Any]) -> list[Row]:
        return self._conn.execute(Q[name], params).fetchall()

    def _read(self, fn: Callable[[Run], T]) -> T:
        with self._lock:
            try:
                return fn(self._run)
            except sqlite3.Error as exc:
                raise translate_error(exc, str(self.path)) from None

    def _write(self, fn: Callable[[Run], T]) -> T:
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    result = fn(self._run)
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
                return result
            except sqlite3.Error as exc:
                if self._is_title_taken(exc):
                    raise  # the caller says which title (SQLKVStore._write_titled)
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise translate_error(exc, str(self.path)) from None

    def _is_title_taken(self, exc: Exception) -> bool:
        return isinstance(exc, sqlite3.IntegrityError) and "kv_namespaces" in str(exc)

    def close(self) -> None:
        with self._lock:
            self._conn.close()
