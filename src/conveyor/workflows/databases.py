"""Where a deployment's workflow store lives: ``workflows.db`` in a SQLite deployment's directory,
tables of migrations 0007, 0010, 0011 and 0014 in a PostgreSQL one.

>>> store = open_store(cv.deployment, cv.engine.clock)
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from conveyor.deployment import Deployment
from conveyor.engine.base import Clock
from conveyor.engine.sqlfile import load_queries, load_script
from conveyor.workflows.sql_store import Row, SqlWorkflowStore, Tx
from conveyor.workflows.store import WorkflowStore

T = TypeVar("T")
SQLITE_FILE = "workflows.db"
SQLITE_VERSION = 4
# A new file is made at version 1 (sqlite_schema.sql) and brought up by the same scripts that
# upgrade an old one, from version v to v + 1: 1 -> 2 adds cron ticks and counters; 2 -> 3 keeps
# the code's settings apart from a PUT's and adds the versions table; 3 -> 4 records instances'
# traceparents and origins and indexes them by trace id.
SQLITE_UPGRADES = {
    1: load_script("conveyor.workflows", "sqlite_v1_to_v2.sql"),
    2: load_script("conveyor.workflows", "sqlite_v2_to_v3.sql"),
    3: load_script("conveyor.workflows", "sqlite_v3_to_v4.sql"),
}


class _SqliteTx:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def rows(self, query: str, params: Mapping[str, Any]) -> list[Row]:
        return self._conn.execute(query, params).fetchall()

    def run(self, query: str, params: Mapping[str, Any]) -> int:
        return self._conn.execute(query, params).rowcount


class SqliteDatabase:
    """``workflows.db``: one connection shared by this process's threads, each transaction
    ``BEGIN IMMEDIATE`` (writers of every process take turns; each commit is fsynced)."""

    def __init__(self, directory: Path) -> None:
        from conveyor.engine.sqlite.storage import ensure_directory, open_database

        ensure_directory(directory)
        self.path = directory / SQLITE_FILE
        self._conn = open_database(
            self.path,
            load_script("conveyor.workflows", "sqlite_schema.sql"),
            version=SQLITE_VERSION,
            upgrades=SQLITE_UPGRADES,
        )
        self._lock = threading.Lock()

    def transaction(self, fn: Callable[[Tx], T], *, durable: bool = True) -> T:
        from conveyor.engine.sqlite.storage import translate_error

        with self._lock:
            try:
                if not durable:  # WAL order keeps it before any later (synced) commit
                    self._conn.execute("PRAGMA synchronous = NORMAL")
                try:
                    self._conn.execute("BEGIN IMMEDIATE")
                    try:
                        result = fn(_SqliteTx(self._conn))
                    except BaseException:
                        self._conn.execute("ROLLBACK")
                        raise
                    self._conn.execute("COMMIT")
                    return result
                finally:
                    if not durable:
                        self._conn.execute("PRAGMA synchronous = FULL")
            except sqlite3.Error as exc:
                raise translate_error(exc, str(self.path)) from None

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class _PostgresTx:
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def rows(self, query: str, params: Mapping[str, Any]) -> list[Row]:
        cursor = self._conn.execute(query, params)
        return cursor.fetchall() if cursor.description is not None else []

    def run(self, query: str, params: Mapping[str, Any]) -> int:
        return int(self._conn.execute(query, params).rowcount)


class PostgresDatabase:
    """The deployment's PostgreSQL database (the engine applied its migrations when it opened it);
    transactions on a small pool, retried whole through outages."""

    def __init__(self, conninfo: str) -> None:
        from conveyor.engine.postgres.database import ReadPool

        self._pool = ReadPool(conninfo, max_size=8)

    def transaction(self, fn: Callable[[Tx], T], *, durable: bool = True) -> T:
        def run(conn: Any) -> T:
            if not durable:  # PostgreSQL's WAL order keeps it before any later flushed commit
                conn.execute("SET LOCAL synchronous_commit TO OFF")
            return fn(_PostgresTx(conn))

        return self._pool.transaction(run, "workflow store")

    def close(self) -> None:
        self._pool.close()


def open_store(deployment: Deployment, clock: Clock) -> WorkflowStore:
    """The workflow store of ``deployment`` (``clock`` is unused: stores take times as arguments)."""
    if deployment.kind == "sqlite":
        return SqlWorkflowStore(
            SqliteDatabase(Path(deployment.location)), load_queries("conveyor.workflows", "sqlite.sql")
        )
    if deployment.kind == "postgresql":
        return SqlWorkflowStore(
            PostgresDatabase(deployment.location), load_queries("conveyor.workflows", "postgres.sql")
        )
    from conveyor.workflows.remote import HttpWorkflowStore

    return HttpWorkflowStore(deployment)
