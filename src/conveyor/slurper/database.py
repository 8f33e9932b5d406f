"""Where a deployment's migration jobs live: ``slurper.db`` in a SQLite deployment's directory (a
file of its own, like ``workflows.db``), or the tables of migration 0012 in a PostgreSQL one. Both
run the named queries of ``queries.sql`` inside :meth:`JobDatabase.transaction`, so the job store's
logic (:mod:`conveyor.slurper.store`) is written once.

>>> db = open_job_database(cv.deployment)
>>> db.transaction(lambda tx: tx.rows("job", {"id": job_id}), "reading a job")
"""

from __future__ import annotations

import re
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from conveyor.deployment import Deployment
from conveyor.engine.sqlfile import load_queries, load_script
from conveyor.slurper.errors import InvalidJob

T = TypeVar("T")
Row = tuple[Any, ...]
QUERIES = load_queries("conveyor.slurper", "queries.sql")
SQLITE_FILE = "slurper.db"
SQLITE_VERSION = 1


class Transaction(ABC):
    """One transaction: named queries of ``queries.sql`` with ``:name`` parameters."""

    @abstractmethod
    def rows(self, query: str, params: Mapping[str, Any]) -> list[Row]: ...

    @abstractmethod
    def run(self, query: str, params: Mapping[str, Any]) -> int:
        """Run a write; the number of rows it changed."""

    def one(self, query: str, params: Mapping[str, Any]) -> Row | None:
        found = self.rows(query, params)
        return found[0] if found else None


class JobDatabase(ABC):
    @abstractmethod
    def transaction(self, fn: Callable[[Transaction], T], what: str, *, durable: bool = True) -> T:
        """Run ``fn`` in one transaction (all its writes commit together, or none); it may run again
        after a transient failure, so it must act on nothing outside the database. ``durable=False``:
        the commit does not wait for its flush (a power cut may lose it, never reorder it after a
        later durable commit), for writes whose loss only repeats work, such as taking a key's lock."""

    @abstractmethod
    def close(self) -> None: ...


class _SqliteTransaction(Transaction):
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def rows(self, query: str, params: Mapping[str, Any]) -> list[Row]:
        return self._conn.execute(QUERIES[query], params).fetchall()

    def run(self, query: str, params: Mapping[str, Any]) -> int:
        return self._conn.execute(QUERIES[query], params).rowcount


class SqliteJobDatabase(JobDatabase):
    """``slurper.db``: one connection shared by this process's threads, each transaction ``BEGIN
    IMMEDIATE`` (the writers of every process take turns; each commit is fsynced)."""

    def __init__(self, directory: Path) -> None:
        from conveyor.engine.sqlite.storage import ensure_directory, open_database

        ensure_directory(directory)
        self.path = directory / SQLITE_FILE
        self._conn = open_database(
            self.path, load_script("conveyor.slurper", "sqlite_schema.sql"), version=SQLITE_VERSION
        )
        self._lock = threading.Lock()

    def transaction(self, fn: Callable[[Transaction], T], what: str, *, durable: bool = True) -> T:
        from conveyor.engine.sqlite.storage import translate_error

        with self._lock:
            try:
                if not durable:  # WAL: the commit skips the flush, and stays before any later one
                    self._conn.execute("PRAGMA synchronous = NORMAL")
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    result = fn(_SqliteTransaction(self._conn))
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
                return result
            except sqlite3.Error as exc:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise translate_error(exc, str(self.path)) from None
            finally:
                if not durable:
                    self._conn.execute("PRAGMA synchronous = FULL")

    def close(self) -> None:
        with self._lock:
            self._conn.close()


_PARAMETER = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")
_PG_QUERIES = {name: _PARAMETER.sub(r"%(\1)s", text.replace("%", "%%")) for name, text in QUERIES.items()}


class _PostgresTransaction(Transaction):
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def rows(self, query: str, params: Mapping[str, Any]) -> list[Row]:
        cursor = self._conn.execute(_PG_QUERIES[query], params)
        return list(cursor.fetchall()) if cursor.description is not None else []

    def run(self, query: str, params: Mapping[str, Any]) -> int:
        return int(self._conn.execute(_PG_QUERIES[query], params).rowcount)


class PostgresJobDatabase(JobDatabase):
    """The slurper tables of a PostgreSQL deployment (migration 0012, applied with the engine's)."""

    def __init__(self, conninfo: str) -> None:
        from conveyor.engine.postgres.database import ReadPool

        self._pool = ReadPool(conninfo, max_size=8)

    def transaction(self, fn: Callable[[Transaction], T], what: str, *, durable: bool = True) -> T:
        def run(conn: Any) -> T:
            if not durable:  # PostgreSQL's WAL order keeps it before any later flushed commit
                conn.execute("SET LOCAL synchronous_commit TO OFF")
            return fn(_PostgresTransaction(conn))

        return self._pool.transaction(run, what)

    def close(self) -> None:
        self._pool.close()


def open_job_database(deployment: Deployment) -> JobDatabase:
    """The job tables of ``deployment``'s engine."""
    if deployment.kind == "sqlite":
        return SqliteJobDatabase(Path(deployment.location))
    if deployment.kind == "postgresql":
        return PostgresJobDatabase(deployment.location)
    raise InvalidJob(
        "migration jobs are not available through a server connection yet; connect to the "
        "deployment's SQLite or PostgreSQL URL, or use the server's REST API"
    )
