"""Group commit on one PostgreSQL connection: concurrent writes share one transaction and one commit.

The same leader/follower scheme as the SQLite engine's: a writer queues its operation and takes the
commit lock; whoever holds the lock runs *everything* queued so far in one transaction, so while one
group commits the next gathers behind the lock. The group is sent in pipeline mode: every statement
of every operation goes out without waiting for the one before, and the results are read once the
commit is back, so a group of 50 sends costs about one round trip and one WAL flush.

An operation is one SQL statement, split in two so that it can be pipelined: ``op(conn, lane)``
sends it and returns a ``finish()`` that reads its result after the commit. A lone operation runs
as an autocommitted statement: one round trip, no BEGIN or COMMIT of its own. When a group fails (a
deadlock, a queue deleted under it), it is rolled back and each operation runs again on its own, so
one bad operation fails alone. When the connection dies, the group is retried on a new one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import psycopg

from conveyor.engine.postgres.database import connect, pipelined_transaction, with_retries

T = TypeVar("T")
Connection = psycopg.Connection[tuple[Any, ...]]
Finish = Callable[[], T]
# An operation gets the connection and the number of the lane it runs on (see :class:`WriteLanes`).
Operation = Callable[[Connection, int], Finish[T]]


class _Op(Generic[T]):
    __slots__ = ("done", "durable", "error", "op", "result")

    def __init__(self, op: Operation[T], durable: bool) -> None:
        self.op = op
        self.durable = durable
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None


class GroupCommitter:
    """Runs write operations on one connection, many to a transaction.

    >>> committer = GroupCommitter(conninfo)
    >>> committer.run(lambda c, lane: (cur := c.execute("SELECT 1")) and (lambda: cur.fetchone()))
    (1,)
    """

    def __init__(self, conninfo: str, lane: int = 0, *, synchronous: bool = True) -> None:
        self._conninfo = conninfo
        self.lane = lane
        self._synchronous = synchronous
        self._conn: Connection | None = None
        self._pending: list[_Op[object]] = []
        self._queue_lock = threading.Lock()
        self._commit_lock = threading.Lock()
        self.commits = 0
        self.operations = 0

    def run(self, op: Operation[T], *, durable: bool = True) -> T:
        """Run ``op`` in a transaction shared with concurrent callers; return once it is committed.

        ``durable=False`` marks an operation whose loss in a server crash is harmless (a lease, a
        lease extension): a group made only of such operations commits without waiting for its WAL
        flush. A group with any durable operation waits, and flushes the others' WAL with it.
        """
        item: _Op[T] = _Op(op, durable)
        with self._queue_lock:
            self._pending.append(item)  # type: ignore[arg-type]
        with self._commit_lock:
            if not item.done:
                with self._queue_lock:
                    group, self._pending = self._pending, []
                self._commit_group(group)
        if item.error is not None:
            raise item.error
        return item.result  # type: ignore[return-value]

    def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed:
            self._conn = connect(self._conninfo, autocommit=True)
            if not self._synchronous:
                self._conn.execute("SET synchronous_commit TO off")
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _attempt(self, group: list[_Op[object]]) -> list[Finish[object]]:
        """Run ``group`` in one pipelined transaction; returns each operation's ``finish``."""
        conn = self._connection()
        try:
            # On a lane whose commits wait for their flush, a group of operations that need none.
            unflushed = self._synchronous and not any(item.durable for item in group)
            if len(group) == 1 and not unflushed:
                finishers = [group[0].op(conn, self.lane)]
            else:
                # One round trip: BEGIN, the statements and COMMIT go out together.
                with pipelined_transaction(conn, synchronous_commit=not unflushed):
                    finishers = [item.op(conn, self.lane) for item in group]
        except psycopg.OperationalError:
            if conn.closed or conn.broken:
                self._drop_connection()
            raise
        self.commits += 1
        return finishers

    def _commit_group(self, group: list[_Op[object]]) -> None:
        try:
            finishers = with_retries(lambda: self._attempt(group), "group commit")
        except BaseException as exc:
            # Not swallowed: each error is handed to the thread that waits for its operation, which
            # raises it; no operation may be left undecided (its waiter would take that for success).
            if len(group) == 1:
                group[0].error = exc
                group[0].done = True
            else:
                for item in group:
                    self._commit_alone(item)
            return
        self.operations += len(group)
        for item, finish in zip(group, finishers, strict=True):
            self._finish(item, finish)

    def _commit_alone(self, item: _Op[object]) -> None:
        try:
            (finish,) = with_retries(lambda: self._attempt([item]), "commit")
        except BaseException as exc:
            item.error = exc
            item.done = True
            return
        self.operations += 1
        self._finish(item, finish)

    @staticmethod
    def _finish(item: _Op[object], finish: Finish[object]) -> None:
        # Committed already: an error reading one result concerns that operation only.
        try:
            item.result = finish()
        except BaseException as exc:
            item.error = exc
        item.done = True

    @property
    def busy(self) -> bool:
        return self._commit_lock.locked()

    @property
    def waiting(self) -> int:
        return len(self._pending)

    def close(self) -> None:
        with self._commit_lock:
            self._drop_connection()


class WriteLanes:
    """A few group committers side by side, so one engine's writes use more than one server backend.

    One connection executes one statement at a time, on one core of the server. An operation takes
    an idle lane (its thread's own if that one is idle), or else joins the group gathering on the
    least loaded one: a lone writer pays nothing extra, and many writers are
    grouped into at most ``lanes`` transactions in flight at once. Operations that need no WAL flush
    (leases, heartbeats) have lanes of their own, so that a lease never waits behind an ack's flush.
    (An operation that may commit without its flush but is no quicker than others, a workflow run's
    ack, says ``quick=False`` and joins the groups of the other lanes, committed without waiting.)
    *Urgent* operations (a wake-up that a fan-in's parent waits for) have a lane of their own too:
    while a thousand children's acks keep every other lane busy, the wake-up is one round trip and
    one WAL flush, not a place in a queue of groups. Its connection is opened on first use.
    """

    def __init__(self, conninfo: str, lanes: int, fast_lanes: int = 1) -> None:
        self._lanes = [GroupCommitter(conninfo, n) for n in range(lanes)]
        self._fast = [GroupCommitter(conninfo, lanes + n, synchronous=False) for n in range(fast_lanes)]
        self._urgent = GroupCommitter(conninfo, lanes + fast_lanes)

    def run(self, op: Operation[T], *, durable: bool = True, urgent: bool = False, quick: bool | None = None) -> T:
        """``quick`` (by default: not ``durable``): on the lanes of operations that need no flush."""
        if urgent:
            return self._urgent.run(op, durable=durable)
        if quick is None:
            quick = not durable
        lanes = self._fast if quick else self._lanes
        # Each thread starts looking at a lane of its own, so that concurrent writers spread over
        # the lanes instead of all racing for the first idle one.
        start = threading.get_ident() % len(lanes)
        for lane in lanes[start:] + lanes[:start]:
            if not lane.busy:
                return lane.run(op, durable=durable)
        return min(lanes, key=lambda lane: lane.waiting).run(op, durable=durable)

    @property
    def _all(self) -> list[GroupCommitter]:
        return [*self._lanes, *self._fast, self._urgent]

    @property
    def commits(self) -> int:
        return sum(lane.commits for lane in self._all)

    @property
    def operations(self) -> int:
        return sum(lane.operations for lane in self._all)

    def close(self) -> None:
        for lane in self._all:
            lane.close()
