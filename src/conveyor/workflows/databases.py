"""Where a deployment's workflow store lives: ``workflows.db`` in a SQLite deployment's directory,
tables of migrations 0007, 0010, 0011 and 0014 in a PostgreSQL one.

>>> store = open_store(cv.deployment, cv.engine.clock)
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from conveyor.deployment import Deployment
from conveyor.engine.base import Clock
from conveyor.engine.sqlfile import load_queries, load_script
from conveyor.errors import StorageError
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


class _LogFlush:
    """The flushes that make ``workflows.db``'s commits durable, shared by the commits made
    meanwhile: a commit is written to the log without a flush (``synchronous=NORMAL``), and its
    thread then waits until one ``fdatasync`` of the log has covered it, the first waiter flushing
    for all (the group commit of the queues' shards). Concurrent runs' step records share flushes
    instead of taking turns to flush each."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None
        self._cond = threading.Condition()
        self._commits = 0  # commits written, counted in their order
        self._durable = 0  # commits a flush has covered
        self._flushing = False
        self._broken: StorageError | None = None

    def written(self) -> int:
        """Count a commit just written (call it before the next commit can start); its ticket."""
        with self._cond:
            self._commits += 1
            return self._commits

    def wait(self, ticket: int) -> None:
        """Return once the commit of ``ticket`` is on disk."""
        with self._cond:
            while self._durable < ticket:
                if self._broken is not None:
                    raise self._broken
                if self._flushing:
                    self._cond.wait()
                    continue
                self._flushing, covered = True, self._commits
                self._cond.release()
                try:
                    self._flush()
                finally:
                    self._cond.acquire()
                    self._flushing = False
                    if self._broken is None:
                        self._durable = covered
                    self._cond.notify_all()

    def _flush(self) -> None:
        """fdatasync the log (SQLite keeps the file, reusing it from its start after a checkpoint,
        while a connection is open). A failed flush fails every later commit too: the kernel
        reports it only once, and later commits build on pages it may have lost."""
        try:
            if self._fd is None:
                self._fd = os.open(f"{self._path}-wal", os.O_RDONLY | os.O_CLOEXEC)
            os.fdatasync(self._fd)
        except OSError as exc:
            self._broken = StorageError(
                f"could not flush the write-ahead log of {self._path} to disk: {exc.strerror}; the "
                "write may or may not have been stored, and this process stores nothing more in the file"
            )

    def close(self) -> None:
        with self._cond:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class SqliteDatabase:
    """``workflows.db``: one connection shared by this process's threads, each transaction
    ``BEGIN IMMEDIATE`` (writers of every process take turns); a durable one returns once a flush
    of the log covered it, a flush that the commits of other threads share (:class:`_LogFlush`)."""

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
        self._conn.execute("PRAGMA synchronous = NORMAL")  # the flush is _LogFlush's
        self._log = _LogFlush(self.path)
        self._lock = threading.Lock()

    def transaction(self, fn: Callable[[Tx], T], *, durable: bool = True) -> T:
        """``fn(tx)`` in one transaction; ``durable=False`` does not wait for the flush (WAL order
        keeps it before any later durable commit), nor does one that changed nothing."""
        from conveyor.engine.sqlite.storage import translate_error

        with self._lock:
            changes = self._conn.total_changes
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    result = fn(_SqliteTx(self._conn))
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise translate_error(exc, str(self.path)) from None
            if self._conn.total_changes == changes:
                return result  # it only read: nothing to flush
            ticket = self._log.written()
        if durable:
            self._log.wait(ticket)
        return result

    def close(self) -> None:
        with self._lock:
            self._conn.close()
            self._log.close()


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
