"""The tables a tool keeps beside the queues (the Super Slurper's jobs, the prober's fleets), on
either engine: a SQLite file of its own in the deployment's directory (``slurper.db``,
``prober.db``), or tables of a numbered migration in the PostgreSQL database. Both run the same
named queries of the tool's ``queries.sql`` inside :meth:`ToolDatabase.transaction`, so the tool's
logic is written once.

>>> TABLES = ToolTables("conveyor.prober", "prober.db", version=1, what="probe fleets")
>>> db = TABLES.open(cv.deployment)
>>> db.transaction(lambda tx: tx.rows("targets", {"account": "local", "fleet": "mcp"}), "listing targets")
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from conveyor.deployment import Deployment
from conveyor.engine.sqlfile import load_queries, load_script
from conveyor.errors import InvalidRequest

T = TypeVar("T")
Row = tuple[Any, ...]


class Transaction(ABC):
    """One transaction: named queries of the tool's ``queries.sql`` with ``:name`` parameters."""

    @abstractmethod
    def rows(self, query: str, params: Mapping[str, Any]) -> list[Row]: ...

    @abstractmethod
    def run(self, query: str, params: Mapping[str, Any]) -> int:
        """Run a write; the number of rows it changed."""

    def one(self, query: str, params: Mapping[str, Any]) -> Row | None:
        found = self.rows(query, params)
        return found[0] if found else None


class ToolDatabase(ABC):
    @abstractmethod
    def transaction(self, fn: Callable[[Transaction], T], what: str, *, durable: bool = True) -> T:
        """Run ``fn`` in one transaction (all its writes commit together, or none); it may run again
        after a transient failure, so it must act on nothing outside the database. ``durable=False``:
        the commit does not wait for its flush (a power cut may lose it, never reorder it after a
        later durable commit), for writes whose loss only repeats work, such as taking a key's lock."""

    @abstractmethod
    def close(self) -> None: ...


_PARAMETER = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")


@dataclasses.dataclass(frozen=True)
class ToolTables:
    """Where the tool of ``package`` keeps its tables: ``sqlite_file`` (made from the package's
    ``sqlite_schema.sql`` at ``version``) or its PostgreSQL migration, both read with the package's
    ``queries.sql``. ``what`` names the tool's state in the refusal over an ``http://`` URL."""

    package: str
    sqlite_file: str
    version: int
    what: str

    @functools.cached_property
    def queries(self) -> dict[str, str]:
        return load_queries(self.package, "queries.sql")

    @functools.cached_property
    def postgres_queries(self) -> dict[str, str]:
        """The same queries with psycopg's ``%(name)s`` parameters."""
        return {name: _PARAMETER.sub(r"%(\1)s", text.replace("%", "%%")) for name, text in self.queries.items()}

    def open(self, deployment: Deployment) -> ToolDatabase:
        """The tool's tables in ``deployment``."""
        if deployment.kind == "sqlite":
            return SqliteToolDatabase(self, Path(deployment.location))
        if deployment.kind == "postgresql":
            return PostgresToolDatabase(self, deployment.location)
        raise InvalidRequest(
            f"{self.what} are not available through a server connection here; connect to the "
            "deployment's SQLite or PostgreSQL URL, or use the server's REST API"
        )


class _SqliteTransaction(Transaction):
    def __init__(self, conn: sqlite3.Connection, queries: Mapping[str, str]) -> None:
        self._conn = conn
        self._queries = queries

    def rows(self, query: str, params: Mapping[str, Any]) -> list[Row]:
        return self._conn.execute(self._queries[query], params).fetchall()

    def run(self, query: str, params: Mapping[str, Any]) -> int:
        return self._conn.execute(self._queries[query], params).rowcount


class SqliteToolDatabase(ToolDatabase):
    """The tool's file: one connection shared by this process's threads, each transaction ``BEGIN
    IMMEDIATE`` (the writers of every process take turns; each commit is fsynced)."""

    def __init__(self, tables: ToolTables, directory: Path) -> None:
        from conveyor.engine.sqlite.storage import ensure_directory, open_database

        ensure_directory(directory)
        self.path = directory / tables.sqlite_file
        self._queries = tables.queries
        self._conn = open_database(self.path, load_script(tables.package, "sqlite_schema.sql"), version=tables.version)
        self._lock = threading.Lock()

    def transaction(self, fn: Callable[[Transaction], T], what: str, *, durable: bool = True) -> T:
        from conveyor.engine.sqlite.storage import translate_error

        with self._lock:
            try:
                if not durable:  # WAL: the commit skips the flush, and stays before any later one
                    self._conn.execute("PRAGMA synchronous = NORMAL")
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    result = fn(_SqliteTransaction(self._conn, self._queries))
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


class _PostgresTransaction(Transaction):
    def __init__(self, conn: Any, queries: Mapping[str, str]) -> None:
        self._conn = conn
        self._queries = queries

    def rows(self, query: str, params: Mapping[str, Any]) -> list[Row]:
        cursor = self._conn.execute(self._queries[query], params)
        return list(cursor.fetchall()) if cursor.description is not None else []

    def run(self, query: str, params: Mapping[str, Any]) -> int:
        return int(self._conn.execute(self._queries[query], params).rowcount)


class PostgresToolDatabase(ToolDatabase):
    """The tool's tables in a PostgreSQL deployment (its migration is applied with the engine's).
    Transactions run at READ COMMITTED on pooled connections; a deadlock is retried."""

    def __init__(self, tables: ToolTables, conninfo: str, max_size: int = 8) -> None:
        from conveyor.engine.postgres.database import ReadPool

        self._queries = tables.postgres_queries
        self._pool = ReadPool(conninfo, max_size=max_size)

    def transaction(self, fn: Callable[[Transaction], T], what: str, *, durable: bool = True) -> T:
        def run(conn: Any) -> T:
            if not durable:  # PostgreSQL's WAL order keeps it before any later flushed commit
                conn.execute("SET LOCAL synchronous_commit TO OFF")
            return fn(_PostgresTransaction(conn, self._queries))

        return self._pool.transaction(run, what)

    def close(self) -> None:
        self._pool.close()
