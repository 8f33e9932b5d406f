"""Where a deployment's workflow store lives: ``workflows.db`` in a SQLite deployment's directory,
tables of migrations 0007, 0010, 0011, 0014, 0022 and 0025 in a PostgreSQL one.

>>> store = open_store(cv.deployment, cv.engine.clock)
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from conveyor.deployment import Deployment
from conveyor.engine.base import Clock
from conveyor.engine.sqlfile import load_queries, load_script
from conveyor.workflows.sql_store import Row, SqlWorkflowStore, Tx
from conveyor.workflows.store import WorkflowStore

T = TypeVar("T")
SQLITE_FILE = "workflows.db"
SQLITE_VERSION = 6
# A new file is made at version 1 (sqlite_schema.sql) and brought up by the same scripts that
# upgrade an old one, from version v to v + 1: 1 -> 2 adds cron ticks and counters; 2 -> 3 keeps
# the code's settings apart from a PUT's and adds the versions table; 3 -> 4 records instances'
# traceparents and origins and indexes them by trace id; 4 -> 5 indexes them by status and creation
# time (a status filter's pages); 5 -> 6 records the token of the claim that started a run.
SQLITE_UPGRADES = {
    1: load_script("conveyor.workflows", "sqlite_v1_to_v2.sql"),
    2: load_script("conveyor.workflows", "sqlite_v2_to_v3.sql"),
    3: load_script("conveyor.workflows", "sqlite_v3_to_v4.sql"),
    4: load_script("conveyor.workflows", "sqlite_v4_to_v5.sql"),
    5: load_script("conveyor.workflows", "sqlite_v5_to_v6.sql"),
}


class _SqliteTx:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def rows(self, query: str, params: Mapping[str, Any]) -> list[Row]:
        return self._conn.execute(query, params).fetchall()

    def run(self, query: str, params: Mapping[str, Any]) -> int:
        return self._conn.execute(query, params).rowcount

    def send(self, query: str, params: Mapping[str, Any]) -> None:
        self._conn.execute(query, params)

    def rows_each(self, statements: Sequence[tuple[str, Mapping[str, Any]]]) -> list[list[Row]]:
        return [self.rows(query, params) for query, params in statements]


# The transactions of one group commit of workflows.db at most: a claim (urgent) waits for the
# group being applied and then leads the next, made of claims only, so a burst of a thousand
# children finishing holds a parent's wake-up for one group of this size, not for the whole burst.
MAX_GROUP = 16


class SqliteDatabase:
    """``workflows.db``: one connection shared by this process's threads, its transactions
    committed in groups by the queues' own :class:`~conveyor.engine.sqlite.group_commit.GroupCommitter`
    (``BEGIN IMMEDIATE``, so writers of every process take turns; each transaction in a savepoint
    of its own, so one that fails is rolled back alone; one fdatasync of the log for the groups
    committed while the last one ran). Groups hold at most ``MAX_GROUP`` transactions, and claims
    commit in groups of their own, ahead of the others: the claim that wakes a parent is not held
    behind its thousand children's writes. Each caller returns once its transaction is committed
    (durably, unless ``durable=False``).

    Claims are volatile (``claims_durable=False``) in a worker's own store: a claim lost in a power
    failure is lost with every process of the machine that could have run under it, and the
    run's first durable write (a step, its suspension or its end) flushes the claim before it (a
    claim that pauses the instance instead is flushed at once). A server's store
    (``claims_durable=True``) serves workers on other machines, which outlive it."""

    groups_commits = True
    syncs_later = True

    def __init__(self, directory: Path, *, claims_durable: bool = False) -> None:
        self.claims_durable = claims_durable
        from conveyor.engine.sqlite.group_commit import GroupCommitter, checkpointed_log_size
        from conveyor.engine.sqlite.storage import ensure_directory, open_database, open_reader

        ensure_directory(directory)
        self.path = directory / SQLITE_FILE
        self._conn = open_database(
            self.path,
            load_script("conveyor.workflows", "sqlite_schema.sql"),
            version=SQLITE_VERSION,
            upgrades=SQLITE_UPGRADES,
        )
        # Its log written ahead, as a shard's: a step's flush of a log that grew cost ~1.5 times one
        # written in place, for the steps until the log's first checkpoint.
        self._committer = GroupCommitter(
            self._conn, str(self.path), max_group=MAX_GROUP, log_ahead=checkpointed_log_size(self._conn)
        )
        self._reader = open_reader(self.path)
        self._read_lock = threading.Lock()

    def transaction(self, fn: Callable[[Tx], T], *, durable: bool = True, urgent: bool = False) -> T:
        return self._committer.run(lambda conn: fn(_SqliteTx(conn)), durable=durable, urgent=urgent)

    def read(self, fn: Callable[[Tx], T]) -> T:
        """``fn`` on the file's read connection, one read at a time: in WAL mode it runs beside the
        writers of every process, taking no write lock and waiting for no group commit (each of its
        statements sees what was committed when it began)."""
        from conveyor.engine.sqlite.storage import translate_error

        with self._read_lock:
            try:
                return fn(_SqliteTx(self._reader))
            except sqlite3.Error as exc:
                raise translate_error(exc, str(self.path)) from None

    def sync(self) -> None:
        self._committer.sync()

    def close(self) -> None:
        with self._read_lock:
            self._reader.close()
        self._committer.close()
        self._conn.close()


class _PostgresTx:
    """A transaction in psycopg's pipeline mode: a statement goes out with the next one that
    waits for its answer (``BEGIN`` with the first read, the writes ``send`` queued with the
    ``COMMIT``), so a claim or a fenced step write is two round trips, not one per statement."""

    def __init__(self, conn: Any, pipeline: Any) -> None:
        self._conn = conn
        self._pipeline = pipeline

    def rows(self, query: str, params: Mapping[str, Any]) -> list[Row]:
        return self.rows_each([(query, params)])[0]

    def run(self, query: str, params: Mapping[str, Any]) -> int:
        cursor = self._conn.execute(query, params)
        self._pipeline.sync()  # its row count is known once its answer is back
        return int(cursor.rowcount)

    def send(self, query: str, params: Mapping[str, Any]) -> None:
        self._conn.execute(query, params)

    def rows_each(self, statements: Sequence[tuple[str, Mapping[str, Any]]]) -> list[list[Row]]:
        cursors = [self._conn.execute(query, params) for query, params in statements]
        self._pipeline.sync()  # sends what is queued and waits for all of their answers
        return [cursor.fetchall() if cursor.description is not None else [] for cursor in cursors]


POOL_SIZE = 32


# Connections kept for urgent transactions (claims) beside the pool.
URGENT_POOL_SIZE = 2


class PostgresDatabase:
    """The deployment's PostgreSQL database (the engine applied its migrations when it opened it);
    transactions on a pool, retried whole through outages, each its own commit. The pool grows
    (to ``POOL_SIZE``) with the transactions under way at once: with fewer connections than a
    burst of runs (a thousand children finishing), a parent's claim queued behind their writes
    for hundreds of ms. Urgent transactions (claims) have a small pool of their own, so that a
    parent's claim does not wait for a connection while its children's writes hold all of them."""

    groups_commits = False
    # A claim commits without waiting for its WAL flush (the wake-up path's one commit). One lost
    # in a crash of the server alone, while its run goes on in a worker, lets the message's next
    # delivery claim the same epoch again, but under another run token, and the first run's writes
    # are refused by it (SqlWorkflowStore.claim has the whole argument).
    claims_durable = False
    # A commit's flush covers only the log written before it; a transaction that wrote nothing
    # waits for none, so a later flush cannot be asked for alone.
    syncs_later = False

    def __init__(self, conninfo: str) -> None:
        from conveyor.engine.postgres.database import ReadPool

        self._pool = ReadPool(conninfo, max_size=POOL_SIZE)
        self._urgent = ReadPool(conninfo, max_size=URGENT_POOL_SIZE)

    def transaction(self, fn: Callable[[Tx], T], *, durable: bool = True, urgent: bool = False) -> T:
        from conveyor.engine.postgres.database import pipelined_transaction

        def run(conn: Any) -> T:
            # durable=False: PostgreSQL's WAL order keeps it before any later flushed commit.
            with pipelined_transaction(conn, synchronous_commit=durable) as pipeline:
                return fn(_PostgresTx(conn, pipeline))

        return (self._urgent if urgent else self._pool).run(run, "workflow store")

    def read(self, fn: Callable[[Tx], T]) -> T:
        """A transaction that writes nothing, so waits for no flush."""
        return self.transaction(fn, durable=False)

    def sync(self) -> None:
        pass

    def close(self) -> None:
        self._pool.close()
        self._urgent.close()


def open_store(deployment: Deployment, clock: Clock) -> WorkflowStore:
    """The workflow store of ``deployment`` for this process's own runs (``clock`` is unused:
    stores take times as arguments)."""
    return _open(deployment, served=False)


def open_served_store(deployment: Deployment, clock: Clock) -> WorkflowStore:
    """The workflow store a server opens for its clients: the same, with durable claims (its
    clients' runs go on when the server's machine fails)."""
    return _open(deployment, served=True)


def _open(deployment: Deployment, *, served: bool) -> WorkflowStore:
    if deployment.kind == "sqlite":
        return SqlWorkflowStore(
            SqliteDatabase(Path(deployment.location), claims_durable=served),
            load_queries("conveyor.workflows", "sqlite.sql"),
        )
    if deployment.kind == "postgresql":
        return SqlWorkflowStore(
            PostgresDatabase(deployment.location), load_queries("conveyor.workflows", "postgres.sql")
        )
    from conveyor.workflows.remote import HttpWorkflowStore

    return HttpWorkflowStore(deployment)
