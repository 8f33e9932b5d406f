"""Group commit: concurrent producers share transactions (and fsyncs); each send stays atomic."""

from __future__ import annotations

import itertools
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path

import pytest

import conveyor
from conveyor.engine.sqlite import SQLiteEngine
from conveyor.engine.sqlite.group_commit import DECLINED, LOG_AHEAD_STEP, GroupCommitter
from conveyor.model import DeliveryPolicy, NewMessage, StoredMessage
from tests.waiting import wait_for


def test_concurrent_sends_share_commits(data_dir: Path) -> None:
    engine = SQLiteEngine(data_dir)
    cv = conveyor.Conveyor(engine)
    q = cv.create_queue("busy")
    q.send("warm-up", content_type="text")
    shard = engine.router.all(q.id)[0]
    before_commits, before_ops = shard.committer.commits, shard.committer.operations
    start = threading.Barrier(32)

    def produce(worker: int) -> None:
        start.wait()
        for n in range(25):
            q.send({"worker": worker, "n": n})

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    commits = shard.committer.commits - before_commits
    operations = shard.committer.operations - before_ops
    assert operations == 32 * 25
    assert commits < operations
    assert q.metrics().backlog_count == 32 * 25 + 1
    cv.close()


def test_sends_on_a_slow_disk_share_commits_and_flushes(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow disk (each flush held 20 ms): sixteen producers' sends share commits and flushes
    (every flush covers at least one commit), and no send returns before a flush that started
    after it was called has ended."""
    engine = SQLiteEngine(data_dir)
    cv = conveyor.Conveyor(engine)
    q = cv.create_queue("slow-disk")
    q.send("warm-up", content_type="text")
    shard = engine.router.all(q.id)[0]
    flushes: list[tuple[float, float]] = []  # (start, end) of each fdatasync
    real_fdatasync = os.fdatasync

    def slow_fdatasync(fd: int) -> None:
        started = time.monotonic()
        time.sleep(0.02)
        real_fdatasync(fd)
        flushes.append((started, time.monotonic()))

    monkeypatch.setattr(os, "fdatasync", slow_fdatasync)
    before = shard.committer.commits
    sends: list[tuple[float, float]] = []
    start = threading.Barrier(16)

    def produce(worker: int) -> None:
        start.wait()
        for n in range(5):
            called = time.monotonic()
            q.send({"worker": worker, "n": n})
            sends.append((called, time.monotonic()))

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    monkeypatch.undo()
    commits = shard.committer.commits - before
    assert len(sends) == 80
    assert len(flushes) <= commits < len(sends)
    for called, returned in sends:
        assert any(called <= began and ended <= returned for began, ended in flushes)
    assert q.metrics().backlog_count == 81
    cv.close()


def test_a_failing_operation_does_not_undo_the_others_in_its_group(data_dir: Path) -> None:
    engine = SQLiteEngine(data_dir)
    cv = conveyor.Conveyor(engine)
    q = cv.create_queue("mixed")
    shard = engine.router.all(q.id)[0]
    results: list[str] = []
    barrier = threading.Barrier(8)

    def good() -> None:
        barrier.wait()
        q.send("ok", content_type="text")
        results.append("ok")

    def bad() -> None:
        barrier.wait()
        try:
            shard.committer.run(lambda c: c.execute("INSERT INTO no_such_table VALUES (1)"))
        except Exception:
            results.append("failed")

    threads = [threading.Thread(target=good) for _ in range(6)] + [threading.Thread(target=bad) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["failed"] * 2 + ["ok"] * 6
    assert q.metrics().backlog_count == 6
    cv.close()


def test_an_urgent_operation_commits_next_in_a_group_of_its_own(tmp_path: Path) -> None:
    """With ``max_group``, a writer that queued behind a burst waits for the group being applied
    and one more; an urgent one leads the next group, alone with the other urgent ones, however
    many were queued before it."""
    conn = sqlite3.connect(tmp_path / "g.db", isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE applied (name TEXT)")
    committer = GroupCommitter(conn, str(tmp_path / "g.db"), max_group=8)
    inside, release = threading.Event(), threading.Event()

    def write(name: str, hold: bool = False) -> None:
        def op(c: sqlite3.Connection) -> None:
            if hold:
                inside.set()
                release.wait()
            c.execute("INSERT INTO applied VALUES (?)", (name,))

        committer.run(op, urgent=name == "urgent")

    threads = [threading.Thread(target=write, args=("first", True))]
    threads[0].start()
    inside.wait()
    threads += [threading.Thread(target=write, args=(f"n{i}",)) for i in range(40)]
    threads.append(threading.Thread(target=write, args=("urgent",)))
    for t in threads[1:-1]:
        t.start()
    while len(committer._pending) < 40:
        time.sleep(0.001)
    threads[-1].start()
    while len(committer._pending) < 41:
        time.sleep(0.001)
    release.set()
    for t in threads:
        t.join()
    order = [r[0] for r in conn.execute("SELECT name FROM applied ORDER BY rowid")]
    assert order[:2] == ["first", "urgent"]
    assert sorted(order) == sorted(["first", "urgent", *(f"n{i}" for i in range(40))])
    assert committer.commits == 1 + 1 + 40 // 8  # the urgent one alone; no group over the cap
    committer.close()
    conn.close()


def test_a_volatile_operation_does_not_wait_for_its_groups_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk held: a durable write waits for the flush of its group, a volatile one (a lease, a
    local claim) in the same group returns once the group is committed."""
    conn = sqlite3.connect(tmp_path / "g.db", isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE applied (name TEXT)")
    committer = GroupCommitter(conn, str(tmp_path / "g.db"))
    inside, release, disk = threading.Event(), threading.Event(), threading.Event()
    real_fdatasync = os.fdatasync

    def held_fdatasync(fd: int) -> None:
        assert disk.wait(30), "the disk was never let go"
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", held_fdatasync)
    returned: dict[str, threading.Event] = {name: threading.Event() for name in ("first", "durable", "volatile")}

    def write(name: str) -> None:
        def op(c: sqlite3.Connection) -> None:
            if name == "first":
                inside.set()
                assert release.wait(30)
            c.execute("INSERT INTO applied VALUES (?)", (name,))

        committer.run(op, durable=name != "volatile")
        returned[name].set()

    threads = {name: threading.Thread(target=write, args=(name,)) for name in returned}
    threads["first"].start()
    assert inside.wait(30)
    threads["durable"].start()
    wait_for(lambda: len(committer._pending) == 1, what="the durable write to queue")
    threads["volatile"].start()
    wait_for(lambda: len(committer._pending) == 2, what="the volatile write to queue")
    release.set()
    assert returned["volatile"].wait(30), "the volatile write waited for the held flush"
    assert not returned["durable"].is_set() and not returned["first"].is_set()
    disk.set()
    for thread in threads.values():
        thread.join(30)
    assert all(event.is_set() for event in returned.values())
    assert sorted(r[0] for r in conn.execute("SELECT name FROM applied")) == ["durable", "first", "volatile"]
    committer.close()
    conn.close()


def test_sync_flushes_volatile_commits_once_and_close_does_not_wait_for_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Volatile commits are not flushed by themselves; sync() flushes the log once for all of them
    (and not again with nothing committed since), and a failed flush is raised by it."""
    conn = sqlite3.connect(tmp_path / "g.db", isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE applied (n INTEGER)")
    committer = GroupCommitter(conn, str(tmp_path / "g.db"))
    flushes: list[int] = []
    real_fdatasync = os.fdatasync

    def counted_fdatasync(fd: int) -> None:
        flushes.append(fd)
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", counted_fdatasync)
    committer.sync()
    assert flushes == []  # nothing committed yet
    for n in range(3):
        committer.run(lambda c, n=n: c.execute("INSERT INTO applied VALUES (?)", (n,)), durable=False)
    assert flushes == []
    committer.sync()
    assert len(flushes) == 1
    committer.sync()
    assert len(flushes) == 1  # nothing since the last flush
    committer.run(lambda c: c.execute("INSERT INTO applied VALUES (3)"))
    assert len(flushes) == 2
    committer.sync()
    assert len(flushes) == 2  # the durable write's own flush covered it

    committer.run(lambda c: c.execute("INSERT INTO applied VALUES (4)"), durable=False)
    closing = threading.Thread(target=committer.close)  # it does not wait for a flush no one asked for
    closing.start()
    closing.join(10)
    assert not closing.is_alive()

    def failing_fdatasync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    committer = GroupCommitter(conn, str(tmp_path / "g.db"))
    committer.run(lambda c: c.execute("INSERT INTO applied VALUES (5)"), durable=False)
    monkeypatch.setattr(os, "fdatasync", failing_fdatasync)
    with pytest.raises(conveyor.StorageError, match="could not flush"):
        committer.sync()
    committer.close()
    conn.close()


def test_durable_writes_that_come_during_a_flush_commit_together_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk held in a flush: durable writes that come meanwhile queue instead of committing
    one by one, and the flush's end lets them commit as one group; a volatile write that comes
    then does not wait for the flush: it commits alone at once."""
    conn = sqlite3.connect(tmp_path / "g.db", isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE applied (name TEXT)")
    committer = GroupCommitter(conn, str(tmp_path / "g.db"))
    flushing, disk = threading.Event(), threading.Event()
    real_fdatasync = os.fdatasync

    def held_fdatasync(fd: int) -> None:
        flushing.set()
        assert disk.wait(30), "the disk was never let go"
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", held_fdatasync)

    def write(name: str, durable: bool = True) -> None:
        committer.run(lambda c: c.execute("INSERT INTO applied VALUES (?)", (name,)), durable=durable)

    first = threading.Thread(target=write, args=("first",))
    first.start()
    assert flushing.wait(30)
    durable = [threading.Thread(target=write, args=(f"d{i}",)) for i in range(5)]
    for t in durable:
        t.start()
    wait_for(lambda: len(committer._pending) == 5, what="the durable writes to queue")
    assert committer.commits == 1  # none of them committed while the flush ran
    disk.set()
    for t in [first, *durable]:
        t.join(30)
    assert (committer.commits, committer.operations) == (2, 6)

    disk.clear()
    flushing.clear()
    durable = [threading.Thread(target=write, args=(f"e{i}",)) for i in range(3)]
    durable[0].start()
    assert flushing.wait(30)
    for t in durable[1:]:
        t.start()
    wait_for(lambda: len(committer._pending) == 2, what="the durable writes to queue")
    write("volatile", durable=False)  # returns while the disk is still held
    assert (committer.commits, committer.operations) == (4, 8)
    disk.set()
    for t in durable:
        t.join(30)
    assert (committer.commits, committer.operations) == (5, 10)
    assert sorted(r[0] for r in conn.execute("SELECT name FROM applied")) == sorted(
        ["first", "volatile", *(f"d{i}" for i in range(5)), *(f"e{i}" for i in range(3))]
    )
    committer.close()
    conn.close()


def test_a_batched_operation_is_announced_at_its_commit_before_its_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk held: ``committed`` is called once the operation is committed (another connection
    reads it), while its writer still waits for the flush."""
    path = tmp_path / "g.db"
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE applied (name TEXT)")
    committer = GroupCommitter(conn, str(path))
    disk, announced, returned = threading.Event(), threading.Event(), threading.Event()
    real_fdatasync = os.fdatasync

    def held_fdatasync(fd: int) -> None:
        assert disk.wait(30), "the disk was never let go"
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", held_fdatasync)

    def insert(c: sqlite3.Connection, names: list[str]) -> list[None]:
        c.executemany("INSERT INTO applied VALUES (?)", [(n,) for n in names])
        return [None] * len(names)

    def write() -> None:
        committer.run_batched(insert, "wake-up", committed=announced.set)
        returned.set()

    thread = threading.Thread(target=write)
    thread.start()
    assert announced.wait(30), "the commit was not announced while its flush was held"
    reader = sqlite3.connect(path)
    assert reader.execute("SELECT name FROM applied").fetchall() == [("wake-up",)]
    assert not returned.is_set()
    disk.set()
    thread.join(30)
    assert returned.is_set()
    reader.close()
    committer.close()
    conn.close()


def test_an_urgent_send_is_leased_while_its_flush_runs(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wake-up someone waits for: this process's consumer leases it once it is committed, while
    the send itself returns only once the shard's log is flushed."""
    engine = SQLiteEngine(data_dir)
    cv = conveyor.Conveyor(engine)
    q = cv.create_queue("wake-ups")
    q.send("warm-up", content_type="text")
    engine.lease(q.id, 1, 30_000, DeliveryPolicy(3, None))
    disk, returned = threading.Event(), threading.Event()
    real_fdatasync = os.fdatasync

    def held_fdatasync(fd: int) -> None:
        assert disk.wait(30), "the disk was never let go"
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", held_fdatasync)

    def send() -> None:
        engine.enqueue(q.id, [NewMessage(b"wake", "text", 0)], urgent=True)
        returned.set()

    thread = threading.Thread(target=send)
    thread.start()

    def lease() -> list[StoredMessage]:
        return engine.lease_waiting(q.id, 1, 30_000, DeliveryPolicy(3, None), 1.0)

    leased = wait_for(lease, what="the urgent send to be leased")
    assert leased[0].body == b"wake" and not returned.is_set()
    disk.set()
    thread.join(30)
    assert returned.is_set()
    engine.close()


def test_a_lone_operation_commits_as_one_statement_and_queued_ones_share_a_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batched operation with an ``alone`` form that makes up a group by itself runs it in
    autocommit (no BEGIN of the committer's) and still returns only after its flush; one it
    declines runs the transaction's way; writers that queued meanwhile share one transaction
    through the batch function, without their ``alone`` form."""
    path = tmp_path / "g.db"
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE applied (name TEXT, how TEXT)")
    committer = GroupCommitter(conn, str(path))
    flushes: list[float] = []
    real_fdatasync = os.fdatasync

    def counted_fdatasync(fd: int) -> None:
        real_fdatasync(fd)
        flushes.append(time.monotonic())

    monkeypatch.setattr(os, "fdatasync", counted_fdatasync)
    inside, release = threading.Event(), threading.Event()
    batches: list[list[str]] = []

    def apply(c: sqlite3.Connection, names: list[str]) -> list[str]:
        assert c.in_transaction
        batches.append(names)
        c.executemany("INSERT INTO applied VALUES (?, 'batch')", [(n,) for n in names])
        return ["batch"] * len(names)

    def alone(c: sqlite3.Connection, name: str) -> object:
        assert not c.in_transaction
        if name == "declined":
            return DECLINED
        if name == "held":
            inside.set()
            assert release.wait(30)
        c.execute("INSERT INTO applied VALUES (?, 'alone')", (name,))
        return "alone"

    def write(name: str) -> object:
        return committer.run_batched(apply, name, alone=alone)

    assert write("first") == "alone"
    assert len(flushes) == 1
    assert write("declined") == "batch"
    assert len(flushes) == 2
    holder = threading.Thread(target=write, args=("held",))
    holder.start()
    assert inside.wait(30)
    queued = [threading.Thread(target=write, args=(f"q{i}",)) for i in range(3)]
    for t in queued:
        t.start()
    wait_for(lambda: len(committer._pending) == 3)
    release.set()
    for t in [holder, *queued]:
        t.join(30)
    rows = dict(conn.execute("SELECT name, how FROM applied").fetchall())
    assert rows == {"first": "alone", "declined": "batch", "held": "alone", "q0": "batch", "q1": "batch", "q2": "batch"}
    assert sorted(batches[-1]) == ["q0", "q1", "q2"]
    assert committer.commits == 4
    assert committer.alone_commits == 2  # "first" and "held"
    committer.close()
    conn.close()


def test_the_log_is_written_ahead_while_it_grows_and_recovers_whole(tmp_path: Path) -> None:
    """With ``log_ahead``, a commit that grew the write-ahead log makes the next transaction append
    a step of zeros, so that the commits after it overwrite the log in place; never past
    ``log_ahead``. A copy of the files as the disk holds them (no -shm: SQLite rebuilds its index
    from the log, as after a power failure) has every commit and nothing else."""
    path = tmp_path / "g.db"
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")  # the log only grows: every commit stays in it
    conn.execute("CREATE TABLE applied (n INTEGER, body BLOB)")
    log_ahead = 3 * LOG_AHEAD_STEP + 12345
    committer = GroupCommitter(conn, str(path), log_ahead=log_ahead)
    log = Path(f"{path}-wal")
    sizes = []
    for n in range(600):
        committer.run(lambda c, n=n: c.execute("INSERT INTO applied VALUES (?, zeroblob(5000))", (n,)))
        sizes.append(log.stat().st_size)
    assert max(sizes) > log_ahead  # 600 commits of ~9 KB outgrow it, and the log grows on as SQLite writes it
    ahead = [b for a, b in itertools.pairwise(sizes) if b - a >= LOG_AHEAD_STEP // 2]
    assert len(ahead) == 3  # the steps, the last one cut at log_ahead
    assert log_ahead in sizes
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(path, copy / "g.db")
    shutil.copy(log, copy / "g.db-wal")
    recovered = sqlite3.connect(copy / "g.db")
    assert recovered.execute("SELECT count(*), min(n), max(n) FROM applied").fetchone() == (600, 0, 599)
    assert recovered.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    recovered.close()
    committer.close()
    conn.close()
