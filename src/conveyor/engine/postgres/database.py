"""Talking to PostgreSQL through outages: connections that come back, and errors that say what failed.

A server restart, a failover or a dropped socket surfaces as ``psycopg.OperationalError``. Every
engine call retries such errors (and deadlocks, which PostgreSQL resolves by aborting one side) on a
fresh connection with a growing pause, for up to ``RECONNECT_SECONDS``, so clients ride out a
restart by themselves. Anything else becomes a :class:`~conveyor.errors.ConveyorError`.

A write retried after its connection died may already have committed: a send can then be stored
twice, an ack counted once and warned about once. Both are within at-least-once delivery.
"""

from __future__ import annotations

import contextlib
import logging
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pgerrors
from psycopg_pool import ConnectionPool

from conveyor.errors import ConveyorError, QueueNotFound, StorageError, StorageFull

log = logging.getLogger("conveyor.engine.postgres")

T = TypeVar("T")

RECONNECT_SECONDS = 60.0
CONNECT_TIMEOUT_SECONDS = 5
FIRST_PAUSE_SECONDS = 0.05
MAX_PAUSE_SECONDS = 1.0
# A pooled connection idle for longer than this is checked (one round trip) before it is handed out.
CHECK_IDLE_SECONDS = 1.0


def translate_error(exc: psycopg.Error) -> ConveyorError:
    """A ConveyorError that says what PostgreSQL refused."""
    if isinstance(exc, pgerrors.DiskFull):
        return StorageFull(f"PostgreSQL is out of disk space: {exc}; nothing of this write was stored")
    if "no partition of relation" in str(exc):
        # The queue's shard partition was dropped with the queue while this write was under way.
        return QueueNotFound("the queue was deleted while this write was under way")
    return StorageError(f"PostgreSQL error: {exc}")


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is worth retrying on a fresh connection (an outage, a deadlock)."""
    if isinstance(exc, pgerrors.DiskFull):
        return False
    return isinstance(exc, psycopg.OperationalError)


def with_retries(fn: Callable[[], T], what: str) -> T:
    """Run ``fn``, retrying transient failures for up to ``RECONNECT_SECONDS``."""
    deadline = time.monotonic() + RECONNECT_SECONDS
    pause = FIRST_PAUSE_SECONDS
    while True:
        try:
            return fn()
        except psycopg.Error as exc:
            if not is_transient(exc) or time.monotonic() + pause > deadline:
                raise translate_error(exc) from exc
            log.warning("%s failed (%s); retrying in %.2f s", what, str(exc).strip() or type(exc).__name__, pause)
            time.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE_SECONDS)


@contextlib.contextmanager
def pipelined_transaction(
    conn: psycopg.Connection[tuple[Any, ...]], *, synchronous_commit: bool = True
) -> Iterator[psycopg.Pipeline]:
    """A transaction on an autocommit connection in pipeline mode, its ``BEGIN`` sent with the
    first statement that waits for an answer and its ``COMMIT`` with the closing sync: a
    transaction whose statements need no answer before its end is one round trip. (psycopg's
    ``transaction()`` in pipeline mode waits for the answer of ``BEGIN``, syncs before ``COMMIT``
    and waits for its answer: three round trips more.) Yields the pipeline, whose ``sync()``
    gets the answers so far. ``synchronous_commit=False``: the commit does not wait for its WAL
    flush. An error, of a statement or of the block, rolls the transaction back."""
    try:
        with conn.pipeline() as pipeline:
            conn.execute("BEGIN")
            if not synchronous_commit:
                conn.execute("SET LOCAL synchronous_commit TO off")
            yield pipeline
            conn.execute("COMMIT")
    except BaseException:
        if not conn.closed and conn.info.transaction_status in (
            psycopg.pq.TransactionStatus.INTRANS,
            psycopg.pq.TransactionStatus.INERROR,
        ):
            with contextlib.suppress(psycopg.Error):  # a broken connection is dropped by its pool
                conn.execute("ROLLBACK")
        raise


def connect(conninfo: str, *, autocommit: bool) -> psycopg.Connection[tuple[Any, ...]]:
    """One connection, with a short connect timeout so an outage is noticed and retried."""
    return psycopg.connect(conninfo, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT_SECONDS)


class ReadPool:
    """Autocommit connections for reads and small catalog transactions, shared by threads.

    A connection handed out is checked with a round trip only when it has not been used for
    ``CHECK_IDLE_SECONDS``: one that just worked almost surely still does, and if the server went
    away meanwhile the call fails on it and is retried on a fresh one like any other outage.
    """

    def __init__(self, conninfo: str, max_size: int = 4) -> None:
        self._used: weakref.WeakKeyDictionary[psycopg.Connection[tuple[Any, ...]], float] = weakref.WeakKeyDictionary()
        self._pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=max_size,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_SECONDS},
            check=self._check,
            open=True,
            timeout=CONNECT_TIMEOUT_SECONDS * 2,
            name="conveyor-read",
        )

    def run(self, fn: Callable[[psycopg.Connection[tuple[Any, ...]]], T], what: str) -> T:
        """Run ``fn`` on a pooled connection, retrying through outages."""

        def attempt() -> T:
            with self._pool.connection() as conn:
                result = fn(conn)
                self._used[conn] = time.monotonic()
                return result

        return with_retries(attempt, what)

    def _check(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        used = self._used.get(conn)
        if used is None or time.monotonic() - used > CHECK_IDLE_SECONDS:
            ConnectionPool.check_connection(conn)

    def transaction(self, fn: Callable[[psycopg.Connection[tuple[Any, ...]]], T], what: str) -> T:
        """Run ``fn`` inside one transaction on a pooled connection."""

        def inside(conn: psycopg.Connection[tuple[Any, ...]]) -> T:
            with conn.transaction():
                return fn(conn)

        return self.run(inside, what)

    def close(self) -> None:
        self._pool.close()
