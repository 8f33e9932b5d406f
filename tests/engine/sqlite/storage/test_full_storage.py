"""A full disk: sends fail with StorageFull naming the file, store nothing of the failed batch, and
leave everything stored before readable; once there is room again, sends work.

The disk is filled with SQLite's ``PRAGMA max_page_count`` on the shard's (or catalog's) writing
connection: SQLite then answers SQLITE_FULL exactly as on a full device, with no mount privileges
needed (CI may have none), and the limit can be lifted to show recovery.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import cast

import pytest

import conveyor
from conveyor.engine.sqlite import SQLiteEngine

from .seeded_storage import SeededDirectory, stored_numbers

BIG_BATCH = [{"body": {"n": -1 - i, "padding": "f" * 2000}} for i in range(20)]


def writing_connection(cv: conveyor.Conveyor, queue: str) -> sqlite3.Connection:
    """The connection that commits the writes of ``queue``'s (one) shard."""
    engine = cast(SQLiteEngine, cv.engine.deployment_engine())
    (shard,) = engine.router.all(cv.queue(queue).id)
    return shard._write_conn


def fill_up(conn: sqlite3.Connection) -> None:
    """No page may be added to the file any more: the next write that needs one finds the disk full."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")


def make_room(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA max_page_count = 1073741823")


def test_send_batch_on_full_disk_raises_storage_full_and_stores_none_of_it(seeded: SeededDirectory) -> None:
    with conveyor.connect(seeded.url) as cv:
        kept = cv.queue("kept")
        conn = writing_connection(cv, "kept")
        fill_up(conn)

        with pytest.raises(conveyor.StorageFull, match="storage is full writing") as raised:
            kept.send_batch(BIG_BATCH)
        assert str(seeded.shard(seeded.kept_id)) in str(raised.value)

        assert stored_numbers(cv, "kept") == list(range(100))
        assert kept.metrics().backlog_count == 100
        assert kept.counters().sent == 100

        make_room(conn)
        kept.send_batch(BIG_BATCH)
        assert stored_numbers(cv, "kept") == sorted([*range(-20, 0), *range(100)])


def test_concurrent_sends_on_full_disk_each_fail_and_store_nothing(seeded: SeededDirectory) -> None:
    """Sends sharing one group commit: SQLite may roll the whole transaction back on SQLITE_FULL,
    so every send of the group must fail, none may report success for a write that was undone."""
    outcomes: list[BaseException | None] = []
    with conveyor.connect(seeded.url) as cv:
        kept = cv.queue("kept")
        fill_up(writing_connection(cv, "kept"))
        start = threading.Barrier(8)

        def send() -> None:
            start.wait()
            try:
                kept.send_batch(BIG_BATCH)
            except BaseException as exc:
                outcomes.append(exc)
            else:
                outcomes.append(None)

        threads = [threading.Thread(target=send) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        assert [type(o) for o in outcomes] == [conveyor.StorageFull] * 8
        assert stored_numbers(cv, "kept") == list(range(100))
        assert kept.counters().sent == 100


def test_full_catalog_refuses_new_queues_naming_it(seeded: SeededDirectory) -> None:
    with conveyor.connect(seeded.url) as cv:
        engine = cast(SQLiteEngine, cv.engine.deployment_engine())
        fill_up(engine.catalog._conn)

        created = 0
        with pytest.raises(conveyor.StorageFull) as raised:
            for i in range(200):
                cv.create_queue(f"q{i}")
                created += 1
        assert str(seeded.catalog) in str(raised.value)
        queues = cv.list_queues()
        assert sorted(q.queue_name for q in queues) == sorted(["kept", "victim", *(f"q{i}" for i in range(created))])
        assert all(q.shards == 1 for q in queues)
        assert cv.queue("kept").metrics().backlog_count == 100
        assert stored_numbers(cv, "victim") == list(range(100))
