"""Corrupt and foreign files: each is refused with CorruptStorage naming the file, and nothing else
of the directory is touched, so the data that is still good stays readable."""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

import conveyor

from .seeded_storage import SeededDirectory, assert_all_stored, stored_numbers

PAGE = 4096


def random_bytes(path: Path) -> None:
    size = path.stat().st_size
    path.write_bytes(os.urandom(size))


def truncated(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def garbled_tables(path: Path) -> None:
    """Overwrite pages 2-4: the root pages of the tables the schema creates first."""
    data = bytearray(path.read_bytes())
    data[PAGE : 4 * PAGE] = os.urandom(3 * PAGE)
    path.write_bytes(bytes(data))


def garbled_header(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[:100] = os.urandom(100)
    path.write_bytes(bytes(data))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "random bytes": random_bytes,
    "truncated": truncated,
    "garbled tables": garbled_tables,
    "garbled header": garbled_header,
}


def foreign_database(path: Path) -> None:
    """A SQLite file some other program made: its own tables and rows, nothing of Conveyor's."""
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, customer TEXT, total REAL)")
        conn.executemany("INSERT INTO invoices (customer, total) VALUES (?, ?)", [("acme", 12.5), ("initech", 99.0)])
    conn.close()


def crashed_foreign_database(path: Path, journal: str) -> list[Path]:
    """A SQLite file of another program that crashed with work in its ``journal`` ("wal": committed
    rows still only in the write-ahead log; "rollback": a hot journal of an unfinished transaction).
    Made by copying the files while the program has them open. Returns the files."""
    scratch = path.with_name("scratch.db")
    conn = sqlite3.connect(scratch)
    suffix = "-wal" if journal == "wal" else "-journal"
    if journal == "wal":
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, customer TEXT)")
    conn.commit()
    if journal == "rollback":
        conn.execute("PRAGMA cache_size = 1")  # spill to the file mid-transaction: the journal is hot
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO invoices (customer) VALUES (?)", [("c" * 100,)] * 2000)
    if journal == "wal":
        conn.commit()
    shutil.copyfile(scratch, path)
    shutil.copyfile(f"{scratch}{suffix}", f"{path}{suffix}")
    conn.rollback()
    conn.close()
    scratch.unlink()
    return [path, Path(f"{path}{suffix}")]


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_corrupt_shard_is_refused_naming_it_and_other_data_survives(seeded: SeededDirectory, damage: str) -> None:
    shard = seeded.shard(seeded.victim_id)
    original = shard.read_bytes()
    DAMAGE[damage](shard)
    damaged = shard.read_bytes()

    with conveyor.connect(seeded.url) as cv:
        victim = cv.queue("victim")
        with pytest.raises(conveyor.CorruptStorage, match=r"is corrupt or not a database|is truncated") as raised:
            victim.send_batch([{"body": {"n": -1}}, {"body": {"n": -2}}])
        assert str(shard) in str(raised.value)
        with pytest.raises(conveyor.CorruptStorage):
            victim.metrics()
        assert stored_numbers(cv, "kept") == list(range(100))

    assert shard.read_bytes() == damaged
    # Put the good file back: the failed calls left the rest of the directory consistent with it.
    shard.write_bytes(original)
    assert_all_stored(seeded)


@pytest.mark.parametrize("damage", ["random bytes", "truncated", "garbled header"])
def test_corrupt_catalog_is_refused_naming_it_and_shards_are_untouched(seeded: SeededDirectory, damage: str) -> None:
    original = seeded.catalog.read_bytes()
    DAMAGE[damage](seeded.catalog)
    before = seeded.files()

    with pytest.raises(conveyor.CorruptStorage, match=r"is corrupt or not a database|is truncated") as raised:
        conveyor.connect(seeded.url)
    assert str(seeded.catalog) in str(raised.value)

    assert seeded.files() == before
    seeded.catalog.write_bytes(original)
    assert_all_stored(seeded)


def test_foreign_database_as_catalog_is_refused_and_left_byte_for_byte(data_dir: Path) -> None:
    data_dir.mkdir()
    catalog = data_dir / "catalog.db"
    foreign_database(catalog)
    before = catalog.read_bytes()

    with pytest.raises(conveyor.CorruptStorage, match="database of another program") as raised:
        conveyor.connect(f"sqlite://{data_dir}")
    assert str(catalog) in str(raised.value)

    assert catalog.read_bytes() == before
    assert sorted(p.name for p in data_dir.iterdir()) == ["catalog.db", "shards"]
    conn = sqlite3.connect(catalog)
    assert conn.execute("SELECT customer, total FROM invoices ORDER BY id").fetchall() == [
        ("acme", 12.5),
        ("initech", 99.0),
    ]
    conn.close()


def test_foreign_database_as_shard_is_refused_and_left_byte_for_byte(seeded: SeededDirectory) -> None:
    shard = seeded.shard(seeded.victim_id)
    original = shard.read_bytes()
    foreign_database(shard)
    before = shard.read_bytes()

    with conveyor.connect(seeded.url) as cv:
        with pytest.raises(conveyor.CorruptStorage, match="database of another program") as raised:
            cv.queue("victim").send({"n": -1})
        assert str(shard) in str(raised.value)
        assert stored_numbers(cv, "kept") == list(range(100))

    assert shard.read_bytes() == before
    shard.write_bytes(original)
    assert_all_stored(seeded)


def test_database_of_a_newer_conveyor_is_refused(seeded: SeededDirectory) -> None:
    conn = sqlite3.connect(seeded.catalog)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    before = seeded.files()

    with pytest.raises(conveyor.CorruptStorage, match="schema version 99") as raised:
        conveyor.connect(seeded.url)
    assert str(seeded.catalog) in str(raised.value)
    assert seeded.files() == before


def test_garbage_write_ahead_logs_are_ignored_and_data_survives(seeded: SeededDirectory) -> None:
    """A ``-wal`` file of random bytes (a torn or foreign log) fails SQLite's header checksum: it is
    not replayed over the good files, which a clean close left complete."""
    for path in (seeded.catalog, seeded.shard(seeded.kept_id), seeded.shard(seeded.victim_id)):
        Path(f"{path}-wal").write_bytes(os.urandom(64 * 1024))

    assert_all_stored(seeded)
    with conveyor.connect(seeded.url) as cv:
        cv.queue("kept").send({"n": 100})
        assert stored_numbers(cv, "kept") == list(range(101))


@pytest.mark.parametrize("journal", ["wal", "rollback"])
def test_crashed_foreign_database_as_catalog_is_refused_and_its_journal_left_alone(
    data_dir: Path, journal: str
) -> None:
    """Refused before a writable connection opens it: closing one would checkpoint the other program's
    log into its file (or roll back its hot journal) and delete the log."""
    data_dir.mkdir()
    files = crashed_foreign_database(data_dir / "catalog.db", journal)
    before = {p: p.read_bytes() for p in files}

    with pytest.raises(conveyor.CorruptStorage, match="database of another program") as raised:
        conveyor.connect(f"sqlite://{data_dir}")
    assert str(data_dir / "catalog.db") in str(raised.value)

    assert {p: p.read_bytes() for p in files} == before


def test_a_file_whose_first_transaction_died_is_made_anew_not_refused(data_dir: Path) -> None:
    """A process killed while making a new file (its first transaction: the switch to WAL) leaves a
    hot journal that rolls the file back to empty: no one's data, so Conveyor initialises it."""
    data_dir.mkdir()
    scratch = data_dir / "scratch.db"
    conn = sqlite3.connect(scratch)
    conn.execute("PRAGMA cache_size = 1")  # spill to the file mid-transaction: the journal is hot
    conn.execute("BEGIN")
    conn.execute("CREATE TABLE half_made (x TEXT)")
    conn.executemany("INSERT INTO half_made VALUES (?)", [("c" * 100,)] * 2000)
    shutil.copyfile(scratch, data_dir / "catalog.db")
    shutil.copyfile(f"{scratch}-journal", data_dir / "catalog.db-journal")
    conn.rollback()
    conn.close()
    scratch.unlink()

    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        cv.create_queue("fresh").send("works", content_type="text")
        assert [m.body for m in cv.queue("fresh").peek()] == ["works"]
