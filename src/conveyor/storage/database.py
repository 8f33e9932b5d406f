"""Where the storage catalog's rows live: ``storage.db`` in a SQLite deployment, or the tables of
migrations 0008 and 0013 in a PostgreSQL one. Both run the same named queries (``queries.sql``) inside
:meth:`Database.transaction`, so the catalog's logic (:mod:`conveyor.storage.catalog`) is written
once."""

from __future__ import annotations

import re
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from conveyor.engine.sqlfile import load_queries, load_script

T = TypeVar("T")
Row = tuple[Any, ...]
Q = load_queries("conveyor.storage", "queries.sql")
SCHEMA_VERSION = 2
UPGRADES = {1: load_script("conveyor.storage", "storage_v1_to_v2.sql")}
FILE_NAME = "storage.db"


class Transaction(ABC):
    """One transaction of the catalog: named queries with ``:name`` parameters."""

    @abstractmethod
    def rows(self, query: str, params: Mapping[str, Any]) -> list[Row]: ...

    @abstractmethod
    def run(self, query: str, params: Mapping[str, Any]) -> int:
        """Run a write; returns the number of rows it changed."""

    def one(self, query: str, params: Mapping[str, Any]) -> Row | None:
        found = self.rows(query, params)
        return found[0] if found else None


class Database(ABC):
    @abstractmethod
    def transaction(self, fn: Callable[[Transaction], T], what: str, *, durable: bool = True) -> T:
        """Run ``fn`` in one transaction: all its writes commit together, or none (it may be run
        again after a transient failure, so it must not act outside the database). ``durable=False``:
        the commit may be lost in a power cut (it does not wait for the flush), for writes whose
        loss only repeats work, such as marking a notification sent."""

    def read(self, fn: Callable[[Transaction], T], what: str) -> T:
        """Run ``fn``, one read statement (no write lock taken)."""
        return self.transaction(fn, what)

    @abstractmethod
    def close(self) -> None: ...


class _SQLiteTransaction(Transaction):
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def rows(self, query: str, params: Mapping[str, Any]) -> list[Row]:
        return self.conn.execute(Q[query], params).fetchall()

    def run(self, query: str, params: Mapping[str, Any]) -> int:
        return self.conn.execute(Q[query], params).rowcount


class SQLiteDatabase(Database):
    """``storage.db`` of a SQLite deployment directory (WAL, every commit fsynced)."""

    def __init__(self, directory: Path) -> None:
        from conveyor.engine.sqlite.storage import ensure_directory, open_database

        ensure_directory(directory)
        self.path = directory / FILE_NAME
        self._conn = open_database(
            self.path,
            load_script("conveyor.storage", "storage_sqlite.sql"),
            version=SCHEMA_VERSION,
            upgrades=UPGRADES,
        )
        self._lock = threading.Lock()

    def transaction(self, fn: Callable[[Transaction], T], what: str, *, durable: bool = True) -> T:
        from conveyor.engine.sqlite.storage import translate_error

        with self._lock:
            try:
                if not durable:
                    self._conn.execute("PRAGMA synchronous = NORMAL")  # WAL: the commit skips the flush
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    result = fn(_SQLiteTransaction(self._conn))
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise translate_error(exc, str(self.path)) from None
            finally:
                if not durable:
                    self._conn.execute("PRAGMA synchronous = FULL")
            return result

    def read(self, fn: Callable[[Transaction], T], what: str) -> T:
        from conveyor.engine.sqlite.storage import translate_error

        # Every read here is one statement: in autocommit mode it is its own snapshot.
        with self._lock:
            try:
                return fn(_SQLiteTransaction(self._conn))
            except sqlite3.Error as exc:
                raise translate_error(exc, str(self.path)) from None

    def close(self) -> None:
        with self._lock:
            self._conn.close()


_PARAMETER = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")


def _psycopg_placeholders(query: str) -> str:
    return _PARAMETER.sub(r"%(\1)s", query.replace("%", "%%"))


class _PostgresTransaction(Transaction):
    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def rows(self, query: str, params: Mapping[str, Any]) -> list[Row]:
        return list(self.conn.execute(PG_QUERIES[query], params).fetchall())

    def run(self, query: str, params: Mapping[str, Any]) -> int:
        return int(self.conn.execute(PG_QUERIES[query], params).rowcount)


PG_QUERIES = {name: _psycopg_placeholders(text) for name, text in Q.items()}


class PostgresDatabase(Database):
    """The storage tables of a PostgreSQL deployment (migrations 0008 and 0013, applied with the engine's)."""

    def __init__(self, conninfo: str) -> None:
        from conveyor.engine.postgres.database import ReadPool

        self._pool = ReadPool(conninfo)

    def transaction(self, fn: Callable[[Transaction], T], what: str, *, durable: bool = True) -> T:
        def attempt(conn: Any) -> T:
            with conn.transaction():
                if not durable:
                    conn.execute("SET LOCAL synchronous_commit = off")
                return fn(_PostgresTransaction(conn))

        return self._pool.run(attempt, what)

    def read(self, fn: Callable[[Transaction], T], what: str) -> T:
        return self._pool.run(lambda conn: fn(_PostgresTransaction(conn)), what)

    def close(self) -> None:
        self._pool.close()
