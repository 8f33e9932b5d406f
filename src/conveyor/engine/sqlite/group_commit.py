"""Group commit on one SQLite connection: concurrent writers share one transaction and one fsync.

Leader/follower, with no thread of its own: a writer queues its operation; if no commit is under way
it becomes the leader and commits *everything* queued so far in one transaction, else it sleeps on
its operation's gate. Once its transaction is committed, the leader hands leadership to the first
writer still waiting, which commits the whole next group while the first group's flush runs; then
the leader opens the gates of its group. A lone writer pays nothing extra; 64 writers pay for a
handful of fsyncs instead of 64. Leadership is handed to a waiting writer directly, not through the
commit lock: woken one lock hand-off at a time, a new leader would start while most of the last group
had not noticed it was done, and groups would stay small.

Each operation runs inside its own savepoint, so one failing operation (a full disk aside) does not
take the others in its group down with it. Operations given with the same *batch function*
(:meth:`GroupCommitter.run_batched`) that follow one another in a group run as one call of it, in one
savepoint: sixty-four one-message sends to a shard become one multi-row store instead of sixty-four
times five statements.

The connection commits with ``synchronous=NORMAL``: SQLite appends the transaction to the write-ahead
log and returns without an fsync (a process crash loses nothing; the machine losing power could).
After a group with any *durable* operation commits, the committer fdatasyncs the log itself — the
flush ``synchronous=FULL`` would make — which also makes every earlier commit durable. A group of
only *volatile* operations (``durable=False``: leases and lease renewals, whose loss in a power
failure only makes a message deliverable again sooner) skips it, and a volatile operation in a
group that is flushed returns without waiting for the flush. One flush runs at a time: groups
that commit while it runs share the next one, so the flushes per second stay what the disk allows
however small the groups come out.

Durable writers that come while a flush runs, with no one leading, do not commit then: they queue,
and the flush's end hands leadership to the first of them, which commits them all as one group
(their flush could not have started before then anyway). Committing on arrival, each would have
found the last one's commit over and made a group of its own: 64 one-message producers committed
three groups in four alone, and paid a transaction, a wait for the flush and a wake-up each. A
volatile or urgent operation does not wait: with no one leading, it commits at once, alone.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from conveyor.engine.sqlite.storage import translate_error
from conveyor.errors import StorageError

T = TypeVar("T")
# Applies the items of consecutive batched operations in one call; one result per item, in order.
BatchFunction = Callable[[sqlite3.Connection, list[Any]], list[Any]]
# Applies one batched operation's item alone, as one autocommitted statement (no BEGIN, no COMMIT),
# when its operation makes up a group by itself; returns DECLINED, having changed nothing, where it
# cannot (the operation then runs in a transaction like any other).
AloneFunction = Callable[[sqlite3.Connection, Any], Any]
DECLINED = object()
# Writing the log ahead (GroupCommitter's ``log_ahead``): zeros appended past the log's end in steps
# of this many bytes, while at least LOG_AHEAD_SPARE bytes are left free on the disk.
LOG_AHEAD_STEP = 1 << 20
LOG_AHEAD_SPARE = 64 << 20
_ZEROS = bytes(LOG_AHEAD_STEP)


def checkpointed_log_size(conn: sqlite3.Connection) -> int:
    """The size of ``conn``'s write-ahead log when SQLite checkpoints it and starts it again from
    the top (its ``wal_autocheckpoint`` pages and their frame headers): the ``log_ahead`` to give."""
    (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    (pages,) = conn.execute("PRAGMA wal_autocheckpoint").fetchone()
    return 32 + int(pages) * (int(page_size) + 24)


class _Op(Generic[T]):
    __slots__ = ("alone", "batch", "committed", "done", "durable", "error", "fn", "gate", "result", "urgent")

    def __init__(
        self,
        fn: Callable[[sqlite3.Connection], T] | None,
        durable: bool,
        batch: tuple[BatchFunction, Any] | None = None,
        urgent: bool = False,
        committed: Callable[[], None] | None = None,
        alone: AloneFunction | None = None,
    ) -> None:
        self.fn = fn
        self.alone = alone
        self.batch = batch
        self.durable = durable
        self.urgent = urgent
        self.committed = committed
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None
        # Held until the op is done or its writer is to lead the next group.
        self.gate = threading.Lock()
        self.gate.acquire()


class GroupCommitter:
    """Runs write operations on ``conn``, many to a transaction.

    >>> committer = GroupCommitter(conn, path)
    >>> committer.run(lambda c: c.execute("INSERT INTO t VALUES (1)").rowcount)
    1

    ``max_group`` caps the operations of one transaction (None: everything queued). A writer waits
    for the group being applied and then for its own, so the cap bounds how long a writer waits
    behind a burst. ``urgent`` operations (:meth:`run`) lead the next group and make it up alone
    (others queued meanwhile wait for the group after), so an urgent writer waits for the group
    being applied and then for the urgent ones only.
    ``on_end(committed)`` is called after every transaction, in the thread that ran it and before
    the next one begins: whether it committed (its flush may still be to come).

    ``log_ahead`` (bytes): while the write-ahead log is shorter, it is written ahead with zeros, a
    step at a time. An fdatasync of a file that grew must also commit the file's new size and
    blocks to the file system's journal, and costs ~1.5 times one of a file written in place; a
    fresh log grows with every commit until it reaches the size at which SQLite checkpoints and
    starts it again from the top (the shard's ~870 first lone sends). Zeros past the last frame
    are no frames to SQLite (its recovery stops at the first frame whose salts do not match), and
    they are written under SQLite's write lock, inside a transaction, where no other connection
    appends: after a commit that grew the file, the next transaction writes the step.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: str,
        *,
        max_group: int | None = None,
        on_end: Callable[[bool], None] | None = None,
        log_ahead: int = 0,
    ) -> None:
        if max_group is not None and max_group < 1:
            raise ValueError(f"max_group is at least 1, not {max_group}")
        self._conn = conn
        self._path = path
        self._max_group = max_group
        self._on_end = on_end
        self._pending: list[_Op[object]] = []
        self._mutex = threading.Lock()
        self._leading = False
        # Commits never fsync by themselves (synchronous=NORMAL): a durable group's commit is followed
        # by an fdatasync of the write-ahead log, which is what synchronous=FULL would do, and a
        # volatile group skips it. (Switching the pragma per group cost two statements a batch.)
        conn.execute("PRAGMA synchronous = NORMAL")
        self._log_fd: int | None = None
        self._log_ahead = log_ahead
        # Whether commits may still grow the log (it is shorter than log_ahead), and whether the last
        # one did, so that the next transaction writes it ahead.
        self._log_growing = log_ahead > 0
        self._grew = False
        # The first flush that failed: after it, nothing more is stored through this committer.
        self._broken: StorageError | None = None
        # Commits are numbered as they commit (the next group commits while a flush runs). One
        # fdatasync runs at a time and covers every commit numbered before it started: a group
        # committed meanwhile waits for it to end and is then covered by the next one, together with
        # every group that committed in between. Sixty-four writers used to start a flush per small
        # group, side by side on the same file, each its own trip to the disk.
        self._committed = 0
        self._durable = 0  # every commit numbered up to this one is on disk
        self._owed = 0  # the last commit numbered whose flush a writer waits for
        self._syncing = False
        self._flushed = threading.Condition(self._mutex)
        self._flush_waiters = 0  # threads in _flushed.wait(), counted under the mutex
        # Transactions committed and operations they carried: operations / commits is the sharing.
        # Of the commits, those of one operation's autocommitted statement (``alone``).
        self.commits = 0
        self.operations = 0
        self.alone_commits = 0

    def run(self, fn: Callable[[sqlite3.Connection], T], *, durable: bool = True, urgent: bool = False) -> T:
        """Run ``fn`` in a transaction shared with concurrent callers; return once it is committed —
        and fsynced, unless ``durable=False``. ``urgent``: in the next group, with the other
        urgent operations only (a claim that a waiting instance's wake-up needs)."""
        return self._submit(_Op(fn, durable, urgent=urgent))

    def run_batched(
        self,
        apply: BatchFunction,
        item: Any,
        *,
        durable: bool = True,
        committed: Callable[[], None] | None = None,
        alone: AloneFunction | None = None,
    ) -> Any:
        """Like :meth:`run`, for ``apply(conn, [item])[0]``; consecutive operations of a group with the
        same ``apply`` run as one call of it (``apply(conn, [item1, item2, ...])``). ``committed``
        is called (by whichever thread commits the group; it must not raise) once the operation is
        committed, before the flush that makes it durable: readers see it from then on.

        ``alone``: when the operation is a group by itself (no other writer queued behind the
        commit), ``alone(conn, item)`` is tried first, in autocommit: one statement that SQLite
        commits by itself, with the same flush after it. It returns the result, or
        :data:`DECLINED` (having changed nothing) for the transaction's way."""
        return self._submit(_Op(None, durable, (apply, item), committed=committed, alone=alone))

    def _submit(self, op: _Op[T]) -> T:
        with self._mutex:
            # A durable operation that comes while a flush runs waits for it to end (see _flush),
            # unless it is urgent: its own flush could not start sooner, and the writers who come
            # meanwhile commit with it, as one group, instead of one by one.
            follow = self._leading or (self._syncing and op.durable and not op.urgent)
            if follow:
                self._pending.append(op)  # type: ignore[arg-type]
            else:
                self._leading = True
        if not follow:
            # No one leads: the op is its own group, taken at once. (Durable operations queued
            # for the flush under way go on waiting for it: a volatile op that took them along
            # would have to wait for their flush as their leader.)
            self._lead(op, [op])  # type: ignore[list-item, arg-type]
        else:
            op.gate.acquire()
            if not op.done:
                self._lead(op)  # type: ignore[arg-type]
        if op.error is not None:
            raise op.error
        return op.result  # type: ignore[return-value]

    def _lead(self, op: _Op[object], group: list[_Op[object]] | None = None) -> None:
        """Commit everything queued (``group``, if the caller took it), hand leadership on (or give
        it up), flush the log if the group needs it, then wake the group.

        Leadership passes on as soon as the transaction is committed, so the next group writes its
        transaction while this one's flush runs: SQLite's write lock is free once COMMIT returns, and
        the flush is of a file descriptor of the committer's own, not of the connection.
        """
        if group is None:
            with self._mutex:
                group = self._take(op)
        committed = flush = False
        try:
            committed, flush = self._commit(group)
        finally:
            with self._mutex:
                if committed:
                    self._committed += 1
                    ticket = self._committed
                    if flush:
                        self._owed = ticket
                if self._pending and (not self._syncing or self._hasty()):
                    self._next_leader().gate.release()
                else:  # nothing queued, or only durable operations, which wait for the flush under way
                    self._leading = False
            for other in group:
                if other.committed is not None and other.error is None:
                    other.committed()
            if flush:
                # A volatile operation does not wait for the others' flush: its own loss in a
                # power failure is allowed, and its commit is already seen by every reader.
                for other in group:
                    if other is not op and not other.durable:
                        other.gate.release()
                self._flush(group, ticket)
            for other in group:
                if other is not op and (other.durable or not flush):
                    other.gate.release()

    def _next_leader(self) -> _Op[object]:
        """Who leads the next group (called with the mutex held, something pending): the first
        urgent operation queued, else the first queued."""
        return next((o for o in self._pending if o.urgent), self._pending[0])

    def _hasty(self) -> bool:
        """Whether an operation queued (called with the mutex held) is volatile or urgent: one that
        does not wait for a flush to end before it commits."""
        return any(o.urgent or not o.durable for o in self._pending)

    def _take(self, leader: _Op[object]) -> list[_Op[object]]:
        """The next group (called with the mutex held). An urgent leader's: the urgent operations
        queued (at most ``max_group``), in the order they came, so that a claim does not wait for
        the burst of writes queued with it. Any other's: everything queued, or, past
        ``max_group``, the leader, then urgent operations, then the oldest others."""
        pending, cap = self._pending, self._max_group
        if leader.urgent:
            group = [o for o in pending if o.urgent][:cap]
            chosen = {id(o) for o in group}
            self._pending = [o for o in pending if id(o) not in chosen]
            return group
        if cap is None or len(pending) <= cap:
            self._pending = []
            return pending
        chosen = {id(leader)}
        for wanted in (True, False):
            for other in pending:
                if len(chosen) == cap:
                    break
                if other.urgent is wanted:
                    chosen.add(id(other))
        group = [o for o in pending if id(o) in chosen]
        self._pending = [o for o in pending if id(o) not in chosen]
        return group

    def _commit(self, group: list[_Op[object]]) -> tuple[bool, bool]:
        """Apply and commit ``group``; whether it committed, and whether it committed durable
        operations, to be flushed."""
        conn = self._conn
        lost: BaseException | None = None
        flush = committed = False
        growing, before = self._log_growing, 0
        try:
            if self._broken is not None:
                raise self._broken
            durable = any(op.durable for op in group)
            if growing:
                before = self._log_size()
            lone = group[0] if len(group) == 1 and group[0].alone is not None and not self._grew else None
            if lone is not None and self._apply_alone(conn, lone):
                # One statement, committed by SQLite itself unless it failed (and was undone).
                if lone.error is None:
                    flush, committed = durable, True
                    self.alone_commits += 1
            else:
                # A lone writer's op is its own unit: no runs to find, no results to hand out.
                units = _units(group) if len(group) > 1 else [(group[0], group)]
                conn.execute("BEGIN IMMEDIATE")
                if self._grew:  # the log's size read now, under the write lock: no one else appends
                    before = self._write_log_ahead(self._log_size())
                for unit, members in units:
                    self._apply(conn, unit, savepoint=len(units) > 1)
                    if unit is not members[0]:
                        _distribute(unit, members)
                    if not conn.in_transaction:
                        # SQLite may roll the whole transaction back on a full disk or an I/O error: the
                        # ops applied before this one lost their writes too, so none of them may succeed.
                        lost = unit.error or self._storage_error("the transaction was rolled back")
                        break
                else:
                    if all(op.error is not None for op in group):
                        conn.execute("ROLLBACK")
                    else:
                        conn.execute("COMMIT")
                        flush, committed = durable, True
        except sqlite3.Error as exc:
            lost = translate_error(exc, self._path)
        except BaseException as exc:
            # No op may be left undecided: a follower would take its missing result for success.
            lost = exc
        if lost is not None:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._fail(group, lost)
        else:
            self.commits += 1
            self.operations += len(group)
        if growing and committed:
            after = self._log_size()
            self._grew = after > before
            self._log_growing = after < self._log_ahead
        if self._on_end is not None:
            self._on_end(committed)
        for op in group:
            op.done = True
        return committed, flush

    def sync(self) -> None:
        """Return once every commit made before the call is durable, volatile ones too: by the
        flush under way if it started after them, else by the next one. A :class:`StorageError`
        if the flush failed."""
        with self._mutex:
            ticket = self._owed = self._committed
        if not self._flush([], ticket):
            assert self._broken is not None
            raise self._broken

    def _flush(self, group: list[_Op[object]], ticket: int) -> bool:
        """Return once the ``ticket``-th commit is flushed (True; False if a flush failed first):
        by the flush under way if it started after that commit, else by the next one, which this
        writer runs unless another waiting writer got to it first. A failed flush fails every
        durable operation of ``group`` it did not see to disk. A flush that ends hands leadership
        to the first durable writer that queued while it ran."""
        with self._mutex:
            while self._durable < ticket and self._broken is None:
                if self._syncing:
                    self._wait_flushed()
                    continue
                self._syncing, covered, synced = True, self._committed, False
                self._mutex.release()
                try:
                    self._sync_log()
                    synced = True
                except StorageError:  # recorded in _broken
                    pass
                finally:
                    self._mutex.acquire()
                    self._syncing = False
                    if synced:
                        self._durable = covered
                    if self._flush_waiters:  # a lone writer's flush wakes no one: skip the call
                        self._flushed.notify_all()
                    if self._pending and not self._leading:  # those who came while it ran
                        self._leading = True
                        self._next_leader().gate.release()
            if self._durable >= ticket:
                return True
            for op in group:
                if op.durable:
                    op.error = self._broken
            return False

    def _wait_flushed(self) -> None:
        """Wait (holding the mutex) for the flush under way to end, counted as a waiter."""
        self._flush_waiters += 1
        try:
            self._flushed.wait()
        finally:
            self._flush_waiters -= 1

    def _log(self) -> int:
        """The committer's own descriptor of the write-ahead log, kept open until :meth:`close` (closing
        one would drop every POSIX lock of this process on the file)."""
        fd = self._log_fd  # once open, read without the mutex: every flush and log-ahead asks
        if fd is not None:
            return fd
        with self._mutex:
            if self._log_fd is None:
                self._log_fd = os.open(f"{self._path}-wal", os.O_RDWR | os.O_CLOEXEC)
            return self._log_fd

    def _log_size(self) -> int:
        try:
            return os.fstat(self._log()).st_size
        except OSError:
            self._log_growing = False  # no log to write ahead: leave it to SQLite
            return 0

    def _write_log_ahead(self, size: int) -> int:
        """Append a step of zeros to the log of ``size`` bytes (called holding SQLite's write lock, in
        a transaction), up to ``log_ahead`` bytes and while the disk keeps ``LOG_AHEAD_SPARE`` free;
        the log's size after. A failure only leaves the log to grow as SQLite writes it."""
        self._grew = False
        length = min(LOG_AHEAD_STEP, self._log_ahead - size)
        try:
            disk = os.statvfs(os.path.dirname(os.path.abspath(self._path)))
            if length <= 0 or disk.f_bavail * disk.f_frsize < LOG_AHEAD_SPARE + length:
                self._log_growing = False
                return size
            return size + os.pwrite(self._log(), memoryview(_ZEROS)[:length], size)
        except OSError:
            self._log_growing = False
            return self._log_size()

    def _sync_log(self) -> None:
        """Make every commit so far durable: fdatasync the write-ahead log (SQLite keeps the file,
        and reuses it from its start after a checkpoint, while this connection is open).

        A failed flush fails its group and every later one: the log may have lost pages that later
        commits build on, and the kernel reports a failed flush only once."""
        try:
            os.fdatasync(self._log())
        except OSError as exc:
            error = StorageError(
                f"could not flush the write-ahead log of {self._path} to disk: {exc.strerror}; the "
                "write may or may not have been stored, and this process stores nothing more in the file"
            )
            with self._mutex:
                self._broken = self._broken or error
            raise error from None

    def close(self) -> None:
        """Wait for the commits under way, then let the log go (the connection is the caller's)."""
        with contextlib.suppress(StorageError):  # after a failed flush nothing waits to be stored
            self.run(lambda c: None)
        with self._mutex:
            while self._syncing or (self._durable < self._owed and self._broken is None):
                self._wait_flushed()
            if self._log_fd is not None:
                os.close(self._log_fd)
                self._log_fd = None

    def _apply(self, conn: sqlite3.Connection, op: _Op[object], *, savepoint: bool) -> None:
        """Run one op; inside a savepoint when it shares the transaction, so a failure undoes only it."""
        if savepoint:
            conn.execute("SAVEPOINT op")
        try:
            if op.fn is not None:
                op.result = op.fn(conn)
            else:  # a batched op alone in its run: its batch function, called for its one item
                assert op.batch is not None
                op.result = op.batch[0](conn, [op.batch[1]])[0]
        except sqlite3.Error as exc:
            op.error = translate_error(exc, self._path)
        except BaseException as exc:
            op.error = exc
        if savepoint and conn.in_transaction:
            if op.error is not None:
                conn.execute("ROLLBACK TO op")
            conn.execute("RELEASE op")

    def _apply_alone(self, conn: sqlite3.Connection, op: _Op[object]) -> bool:
        """Try ``op``'s autocommitted form; whether it ran (its result or error is set) rather than
        declined."""
        assert op.alone is not None and op.batch is not None
        try:
            result = op.alone(conn, op.batch[1])
        except sqlite3.Error as exc:
            op.error = translate_error(exc, self._path)
            return True
        except BaseException as exc:
            op.error = exc
            return True
        if result is DECLINED:
            return False
        op.result = result
        return True

    def _storage_error(self, text: str) -> BaseException:
        return translate_error(sqlite3.OperationalError(text), self._path)

    @staticmethod
    def _fail(group: list[_Op[object]], error: BaseException) -> None:
        for op in group:
            if op.error is None:
                op.error = error
            op.done = True


def _units(group: list[_Op[object]]) -> list[tuple[_Op[object], list[_Op[object]]]]:
    """The group as units applied one by one: a plain op alone, or a run of consecutive batched ops
    with the same batch function, behind one op that calls it with all their items."""
    runs: list[list[_Op[object]]] = []
    for op in group:
        last = runs[-1][-1] if runs else None
        if op.batch is not None and last is not None and last.batch is not None and last.batch[0] == op.batch[0]:
            runs[-1].append(op)
        else:
            runs.append([op])
    units: list[tuple[_Op[object], list[_Op[object]]]] = []
    for members in runs:
        first = members[0]
        if first.batch is None or len(members) == 1:
            units.append((first, members))
            continue
        apply, items = first.batch[0], [m.batch[1] for m in members if m.batch is not None]
        units.append((_Op(_batch_call(apply, items), first.durable), members))
    return units


def _batch_call(apply: BatchFunction, items: list[Any]) -> Callable[[sqlite3.Connection], list[Any]]:
    def call(conn: sqlite3.Connection) -> list[Any]:
        return apply(conn, items)

    return call


def _distribute(unit: _Op[object], members: list[_Op[object]]) -> None:
    """Hand a batch call's results (or its error) to the operations it ran for."""
    if unit.error is not None:
        for member in members:
            member.error = unit.error
        return
    results = unit.result
    assert isinstance(results, list) and len(results) == len(members)
    for member, result in zip(members, results, strict=True):
        member.result = result
