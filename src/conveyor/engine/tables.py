"""A part's own tables on the deployment's engine: a SQLite file of its own in the deployment
directory (``storage.db``, ``slurper.db``, ...) or the tables of its migrations in the PostgreSQL
database. Both run the part's named queries (one ``queries.sql``, ``:name`` parameters) inside
:meth:`Tables.transaction`, so what the part does with its rows is written once for both engines.

>>> tables = open_tables(cv.deployment, SqliteFile("slurper.db", schema, version=1), queries)
>>> tables.transaction(lambda tx: tx.one("job", {"id": job_id}), "reading a job")
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from conveyor.deployment import Deployment

T = TypeVar("T")
Row = tuple[Any, ...]


@dataclasses.dataclass(frozen=True)
class SqliteFile:
    """A part's SQLite file: its name in the deployment directory, the schema a new file is made
    with, its version, and the scripts that bring a file of version ``v`` to ``v + 1``."""

    name: str
    schema: str
    version: int
    upgrades: Mapping[int, str] = dataclasses.field(default_factory=dict)


class Transaction(ABC):
    """One transaction: the part's named queries with ``:name`` parameters."""

    @abstractmethod
    def rows(self, query: str, params: Mapping[str, Any]) -> list[Row]: ...

    @abstractmethod
    def run(self, query: str, params: Mapping[str, Any]) -> int:
        """Run a write; the number of rows it changed."""

    def one(self, query: str, params: Mapping[str, Any]) -> Row | None:
        found = self.rows(query, params)
        return found[0] if found else None


class WouldWait(Exception):
    """A read asked not to wait (:meth:`Tables.read_nowait`) that would have."""


class Tables(ABC):
    @abstractmethod
    def transaction(self, fn: Callable[[Transaction], T], what: str, *, durable: bool = True) -> T:
        """Run ``fn`` in one transaction: all its writes commit together, or none. It may run
        again after a transient failure, so it must act on nothing outside the database.
        ``durable=False``: the commit does not wait for its flush (a power cut may lose it, never
        reorder it after a later durable commit), for writes whose loss only repeats work.
        ``what`` names the work in the error of a database that stays unreachable."""

    def read(self, fn: Callable[[Transaction], T], what: str) -> T:
        """Run ``fn``, which only reads (no write lock taken; on SQLite a write is refused), each
        of its statements one snapshot. Readers of one process run at once, beside its writer."""
        return self.transaction(fn, what)

    def read_nowait(self, fn: Callable[[Transaction], T], what: str) -> T:
        """:meth:`read`, for an event loop's own thread: :class:`WouldWait` instead of waiting for
        a lock or the network. SQLite: a read waits for neither (WAL) but in rare moments (another
        connection recovering the log, say), when this one gives up at once; PostgreSQL: always
        (every read is a round trip)."""
        raise WouldWait(what)

    @abstractmethod
    def close(self) -> None: ...


class _SqliteTransaction(Transaction):
    def __init__(self, conn: sqlite3.Connection, queries: Mapping[str, str]) -> None:
        self._conn = conn
        self._queries = queries

    def rows(self, query: str, params: Mapping[str, Any]) -> list[Row]:
        return self._conn.execute(self._queries[query], params).fetchall()

    def run(self, query: str, params: Mapping[str, Any]) -> int:
        return self._conn.execute(self._queries[query], params).rowcount


class SqliteTables(Tables):
    """The part's file in a SQLite deployment directory (WAL): one writing connection shared by
    this process's threads, each transaction ``BEGIN IMMEDIATE`` (the writers of every process take
    turns), each durable commit fsynced; and reading connections (``query_only``), one per read in
    progress, kept for the next: WAL lets readers run beside the writer and each other, so threads
    reading at once (a server's) do not queue for one connection. Each statement of a :meth:`read`
    is one snapshot, which sees every transaction committed before it began."""

    def __init__(self, directory: Path, file: SqliteFile, queries: Mapping[str, str]) -> None:
        from conveyor.engine.sqlite.storage import ensure_directory, open_database

        ensure_directory(directory)
        self.path = directory / file.name
        self._conn = open_database(self.path, file.schema, version=file.version, upgrades=dict(file.upgrades))
        self._queries = queries
        self._lock = threading.Lock()
        # Idle reading connections: those that wait for a lock (read) and those that do not (read_nowait).
        self._readers: dict[bool, list[sqlite3.Connection]] = {True: [], False: []}
        self._readers_lock = threading.Lock()
        self._closed = False

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

    def read(self, fn: Callable[[Transaction], T], what: str) -> T:
        return self._read(fn, wait=True)

    def read_nowait(self, fn: Callable[[Transaction], T], what: str) -> T:
        return self._read(fn, wait=False)

    def _read(self, fn: Callable[[Transaction], T], *, wait: bool) -> T:
        from conveyor.engine.sqlite.storage import translate_error

        conn = self._reader(wait)
        try:
            # Autocommit: each statement is its own snapshot, with no BEGIN and COMMIT around it.
            return fn(_SqliteTransaction(conn, self._queries))
        except sqlite3.Error as exc:
            if not wait and (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF == sqlite3.SQLITE_BUSY:
                raise WouldWait(str(self.path)) from None
            raise translate_error(exc, str(self.path)) from None
        finally:
            self._put_back(conn, wait)

    def _reader(self, wait: bool) -> sqlite3.Connection:
        from conveyor.engine.sqlite.storage import BUSY_TIMEOUT, open_reader, translate_error

        with self._readers_lock:
            if self._closed:
                raise translate_error(sqlite3.ProgrammingError("the tables are closed"), str(self.path))
            idle = self._readers[wait]
            if idle:
                return idle.pop()
        return open_reader(self.path, timeout=BUSY_TIMEOUT if wait else 0.0)

    def _put_back(self, conn: sqlite3.Connection, wait: bool) -> None:
        with self._readers_lock:
            if not self._closed:
                self._readers[wait].append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._readers_lock:
            self._closed = True
            readers = [*self._readers[True], *self._readers[False]]
            self._readers = {True: [], False: []}
        for conn in readers:
            conn.close()
        with self._lock:
            self._conn.close()


_PARAMETER = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")


def psycopg_queries(queries: Mapping[str, str]) -> dict[str, str]:
    """``queries`` with their ``:name`` parameters written as psycopg's ``%(name)s``."""
    return {name: _PARAMETER.sub(r"%(\1)s", text.replace("%", "%%")) for name, text in queries.items()}


class _PostgresTransaction(Transaction):
    def __init__(self, conn: Any, queries: Mapping[str, str]) -> None:
        self._conn = conn
        self._queries = queries

    def rows(self, query: str, params: Mapping[str, Any]) -> list[Row]:
        cursor = self._conn.execute(self._queries[query], params)
        return list(cursor.fetchall()) if cursor.description is not None else []

    def run(self, query: str, params: Mapping[str, Any]) -> int:
        return int(self._conn.execute(self._queries[query], params).rowcount)


class PostgresTables(Tables):
    """The part's tables in a PostgreSQL deployment (its migrations are applied with the engine's),
    on a pool of ``pool_size`` connections, each transaction retried whole through outages."""

    def __init__(self, conninfo: str, queries: Mapping[str, str], *, pool_size: int = 4) -> None:
        from conveyor.engine.postgres.database import ReadPool

        self._pool = ReadPool(conninfo, max_size=pool_size)
        self._queries = psycopg_queries(queries)

    def transaction(self, fn: Callable[[Transaction], T], what: str, *, durable: bool = True) -> T:
        def run(conn: Any) -> T:
            if not durable:  # PostgreSQL's WAL order keeps it before any later flushed commit
                conn.execute("SET LOCAL synchronous_commit TO OFF")
            return fn(_PostgresTransaction(conn, self._queries))

        return self._pool.transaction(run, what)

    def read(self, fn: Callable[[Transaction], T], what: str) -> T:
        return self._pool.run(lambda conn: fn(_PostgresTransaction(conn, self._queries)), what)

    def close(self) -> None:
        self._pool.close()


def open_tables(
    deployment: Deployment, file: SqliteFile, queries: Mapping[str, str], *, pool_size: int = 4
) -> Tables | None:
    """The part's tables on ``deployment``'s engine; None over HTTP (a server's client reaches
    them through the server's routes, not directly)."""
    if deployment.kind == "sqlite":
        return SqliteTables(Path(deployment.location), file, queries)
    if deployment.kind == "postgresql":
        return PostgresTables(deployment.location, queries, pool_size=pool_size)
    return None
