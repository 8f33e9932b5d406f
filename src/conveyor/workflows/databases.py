"""Where a deployment's workflow store lives: ``workflows.db`` in a SQLite deployment's directory,
tables of migrations 0007, 0010, 0011 and 0014 in a PostgreSQL one.

>>> store = open_store(cv.deployment, cv.engine.clock)
"""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

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


@dataclasses.dataclass(eq=False)
class _Job:
    """One caller's transaction, waiting to be run in the next group commit."""

    fn: Callable[[Tx], Any]
    durable: bool
    done: bool = False
    result: Any = None
    error: BaseException | None = None


class SqliteDatabase:
    """``workflows.db``: one connection shared by this process's threads, transactions ``BEGIN
    IMMEDIATE`` (writers of every process take turns), committed in groups: the transactions that
    wait while one commit is fsynced run next in one SQLite transaction, each in a savepoint of its
    own (one that fails is rolled back alone), under one fsync. A burst of writers — a thousand
    children finishing at once — so waits for a few commits, not one per writer, and a parent's
    claim behind them is not held for hundreds of fsyncs. Each caller returns once its
    transaction is committed (durably, unless every one in the group was ``durable=False``)."""

    groups_commits = True

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
        self._lock = threading.Lock()  # held by the thread committing a group
        self._queued: list[_Job] = []
        self._queue_lock = threading.Lock()

    def transaction(self, fn: Callable[[Tx], T], *, durable: bool = True) -> T:
        job = _Job(fn, durable)
        with self._queue_lock:
            self._queued.append(job)
        with self._lock:
            if not job.done:  # else the thread before us committed it with its group
                self._commit_group()
        if job.error is not None:
            raise job.error
        return cast(T, job.result)

    def _commit_group(self) -> None:
        from conveyor.engine.sqlite.storage import translate_error

        with self._queue_lock:
            group, self._queued = self._queued, []
        conn = self._conn
        tx = _SqliteTx(conn)
        durable = any(job.durable for job in group)
        try:
            if not durable:  # WAL order keeps it before any later (synced) commit
                conn.execute("PRAGMA synchronous = NORMAL")
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for job in group:
                        conn.execute("SAVEPOINT job")
                        try:
                            job.result = job.fn(tx)
                        except BaseException as exc:  # the caller's to handle: re-raised in its thread
                            conn.execute("ROLLBACK TO job")
                            job.error = translate_error(exc, str(self.path)) if isinstance(exc, sqlite3.Error) else exc
                        conn.execute("RELEASE job")
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            finally:
                if not durable:
                    conn.execute("PRAGMA synchronous = FULL")
        except BaseException as exc:  # nothing of the group was committed: every caller fails
            error = translate_error(exc, str(self.path)) if isinstance(exc, sqlite3.Error) else exc
            for job in group:
                job.result, job.error = None, error
        finally:
            for job in group:
                job.done = True

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


POOL_SIZE = 32


class PostgresDatabase:
    """The deployment's PostgreSQL database (the engine applied its migrations when it opened it);
    transactions on a pool, retried whole through outages, each its own commit. The pool grows
    (to ``POOL_SIZE``) with the transactions under way at once: with fewer connections than a
    burst of runs (a thousand children finishing), a parent's claim queued behind their writes
    for hundreds of ms."""

    groups_commits = False

    def __init__(self, conninfo: str) -> None:
        from conveyor.engine.postgres.database import ReadPool

        self._pool = ReadPool(conninfo, max_size=POOL_SIZE)

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
