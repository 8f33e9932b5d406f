"""KV namespaces of a PostgreSQL deployment: the tables of migration ``0009_kv.sql`` (queries in
``kv_postgres.sql``), on pooled connections that ride out a server restart (``database.ReadPool``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pgerrors

from conveyor.engine.base import Clock
from conveyor.engine.postgres.database import ReadPool
from conveyor.engine.postgres.migrate import migrate
from conveyor.engine.sqlfile import load_queries
from conveyor.storage.kv_sql import Row, Run, SQLKVStore

T = TypeVar("T")
Q = load_queries("conveyor.storage", "kv_postgres.sql")


class PostgresKVStore(SQLKVStore):
    def __init__(self, conninfo: str, clock: Clock) -> None:
        self.clock = clock
        migrate(conninfo)
        self._pool = ReadPool(conninfo)

    @staticmethod
    def _runner(conn: psycopg.Connection[tuple[Any, ...]]) -> Run:
        def run(name: str, params: dict[str, Any]) -> list[Row]:
            cursor = conn.execute(Q[name], params)
            return cursor.fetchall() if cursor.description is not None else []

        return run

    def _read(self, fn: Callable[[Run], T]) -> T:
        return self._pool.run(lambda conn: fn(self._runner(conn)), "KV read")

    def _write(self, fn: Callable[[Run], T]) -> T:
        return self._pool.transaction(lambda conn: fn(self._runner(conn)), "KV write")

    def _is_title_taken(self, exc: Exception) -> bool:
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        return isinstance(cause, pgerrors.UniqueViolation)

    def close(self) -> None:
        self._pool.close()
