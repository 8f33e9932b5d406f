"""A part's SQLite tables (:class:`conveyor.engine.tables.SqliteTables`): reads run on connections
of their own, several at once and beside the writer; writes keep the one writing connection;
read_nowait answers WouldWait rather than wait for a lock; close() closes every connection."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conveyor.engine.sqlite.storage import _connections_to
from conveyor.engine.tables import SqliteFile, SqliteTables, Transaction
from conveyor.errors import StorageError

SCHEMA = """
PRAGMA application_id = 1131376246;
PRAGMA user_version = 1;
CREATE TABLE parts (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
"""
FILE = SqliteFile("parts.db", SCHEMA, version=1)
QUERIES = {
    "insert": "INSERT INTO parts (id, name) VALUES (:id, :name)",
    "count": "SELECT count(*) FROM parts",
    "name": "SELECT name FROM parts WHERE id = :id",
}


@pytest.fixture
def tables(tmp_path: Path) -> Iterator[SqliteTables]:
    opened = SqliteTables(tmp_path, FILE, QUERIES)
    yield opened
    opened.close()


def count(tables: SqliteTables) -> int:
    row = tables.read(lambda tx: tx.one("count", {}), "counting")
    assert row is not None
    return int(row[0])


def insert(tables: SqliteTables, id: int) -> None:
    tables.transaction(lambda tx: tx.run("insert", {"id": id, "name": f"part {id}"}), "inserting")


def test_reads_of_several_threads_run_at_once(tables: SqliteTables) -> None:
    insert(tables, 1)
    threads = 6
    # Each read waits inside its transaction until every thread is inside one: reads that took
    # turns on one connection would never all get there (the barrier breaks after its timeout).
    inside = threading.Barrier(threads, timeout=60)
    names: list[str] = []

    def read(tx: Transaction) -> str:
        inside.wait()
        row = tx.one("name", {"id": 1})
        assert row is not None
        return str(row[0])

    def reader() -> None:
        names.append(tables.read(read, "reading"))

    workers = [threading.Thread(target=reader) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert names == ["part 1"] * threads


def test_a_write_commits_while_a_read_is_in_progress_and_the_reads_next_statement_sees_it(
    tables: SqliteTables,
) -> None:
    insert(tables, 1)

    def read_around_a_write(tx: Transaction) -> tuple[int, int]:
        before = tx.one("count", {})
        writer = threading.Thread(target=insert, args=(tables, 2))
        writer.start()
        writer.join()  # the writer's connection is not the reader's: it does not wait for this read
        after = tx.one("count", {})
        assert before is not None and after is not None
        return int(before[0]), int(after[0])

    assert tables.read(read_around_a_write, "reading") == (1, 2)


def test_a_read_sees_every_write_committed_before_it_on_any_thread(tables: SqliteTables) -> None:
    for id in range(1, 4):
        insert(tables, id)
        assert count(tables) == id
        seen: list[int] = []
        other = threading.Thread(target=lambda into=seen: into.append(count(tables)))
        other.start()
        other.join()
        assert seen == [id]


def test_a_write_inside_a_read_is_refused_and_changes_nothing(tables: SqliteTables) -> None:
    with pytest.raises(StorageError, match=r"parts\.db: attempt to write a readonly database"):
        tables.read(lambda tx: tx.run("insert", {"id": 1, "name": "x"}), "reading")
    assert count(tables) == 0
    insert(tables, 1)  # the reader that refused it is still usable, and so is the writer
    assert count(tables) == 1


def test_a_read_that_raises_passes_its_error_on_and_its_connection_reads_on(tables: SqliteTables) -> None:
    def fail(tx: Transaction) -> None:
        tx.one("count", {})
        raise ValueError("the caller's own error")

    with pytest.raises(ValueError, match="the caller's own error"):
        tables.read(fail, "reading")
    insert(tables, 1)
    assert count(tables) == 1


def test_close_closes_the_reading_connections_too(tmp_path: Path) -> None:
    tables = SqliteTables(tmp_path, FILE, QUERIES)
    key = str((tmp_path / FILE.name).resolve())
    inside = threading.Barrier(3, timeout=60)
    readers = [threading.Thread(target=lambda: tables.read(lambda tx: inside.wait(), "reading")) for _ in range(3)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    assert _connections_to[key] == 4  # the writer and three readers, kept for the next reads
    tables.close()
    assert _connections_to[key] == 0
    with pytest.raises(StorageError, match="closed"):
        count(tables)
    assert _connections_to[key] == 0


def test_read_nowait_answers_while_a_writer_holds_the_write_lock(tables: SqliteTables) -> None:
    insert(tables, 1)
    writing = threading.Event()
    done = threading.Event()

    def slow_write(tx: Transaction) -> None:
        tx.run("insert", {"id": 2, "name": "part 2"})
        writing.set()
        assert done.wait(60)

    writer = threading.Thread(target=lambda: tables.transaction(slow_write, "writing"))
    writer.start()
    try:
        assert writing.wait(60)
        assert tables.read_nowait(lambda tx: tx.one("count", {}), "counting") == (1,)  # its snapshot: before
    finally:
        done.set()
        writer.join()
    assert tables.read_nowait(lambda tx: tx.one("count", {}), "counting") == (2,)
