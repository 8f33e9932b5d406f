"""``conveyor doctor`` on real damaged files: it names each damaged file and the queue it belongs
to (with its account), says what to do, exits 1 when anything is wrong and 0 when nothing is, and
changes nothing."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from conveyor.cli.main import cli
from conveyor.engine.sqlite import SQLiteEngine
from conveyor.engine.sqlite.catalog import VERSION as CATALOG_VERSION
from conveyor.engine.sqlite.shard import SCHEMA_VERSION as SHARD_VERSION
from conveyor.model import NewMessage, QueueSettings, WorkerEntry

from .seeded_storage import SeededDirectory

PAGE = 8192


def doctor(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--url", url, "doctor", *args], catch_exceptions=False)


def doctor_json(url: str) -> tuple[int, dict[str, Any]]:
    result = doctor(url, "--json")
    return result.exit_code, json.loads(result.stdout)


def by_account_and_name(report: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(q["account_id"], q["queue_name"]): q for q in report["queues"]}


def garble_header(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(os.urandom(100) + data[100:])


def garble_pages(path: Path) -> None:
    """Random bytes over pages 2-4 (the tables' root pages); the header stays good."""
    data = bytearray(path.read_bytes())
    data[PAGE : 4 * PAGE] = os.urandom(3 * PAGE)
    path.write_bytes(bytes(data))


def foreign(path: Path) -> None:
    path.unlink()
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()


def newer_schema(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "garbled header": (garble_header, "is corrupt or not a database"),
    "garbled pages": (garble_pages, "fails SQLite's check|is corrupt"),
    "emptied": (lambda path: os.truncate(path, 0), "is empty"),
    "truncated": (lambda path: os.truncate(path, path.stat().st_size - PAGE), "is truncated"),
    "removed": (lambda path: path.unlink(), "is missing"),
    "another program's": (foreign, "database of another program"),
    "newer schema": (newer_schema, "schema version 99"),
}


def test_doctor_on_a_healthy_deployment_says_all_good_and_writes_nothing(seeded: SeededDirectory) -> None:
    before = seeded.files()

    code, report = doctor_json(seeded.url)
    assert code == 0 and report["ok"] is True
    assert [(q["account_id"], q["queue_name"], q["ok"], q["backlog"]) for q in report["queues"]] == [
        ("local", "kept", True, 100),
        ("local", "victim", True, 100),
    ]
    assert report["upgrades"] == [] and report["catalog"] == []
    table = doctor(seeded.url)
    assert table.exit_code == 0 and "All good." in table.stdout
    assert "schema version" not in table.stdout

    assert seeded.files() == before
    assert not list(seeded.data_dir.rglob("*-wal")), "doctor left a write-ahead log behind"


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_doctor_names_the_damaged_shard_its_queue_and_what_to_do(seeded: SeededDirectory, damage: str) -> None:
    shard = seeded.shard(seeded.victim_id)
    harm, expected = DAMAGE[damage]
    harm(shard)
    before = seeded.files()

    code, report = doctor_json(seeded.url)
    assert code == 1 and report["ok"] is False
    queues = by_account_and_name(report)
    assert queues["local", "kept"]["ok"] is True and queues["local", "kept"]["backlog"] == 100
    victim = queues["local", "victim"]
    assert victim["ok"] is False and victim["backlog"] is None
    (problem,) = victim["problems"]
    assert problem["file"] == f"shards/{seeded.victim_id}.0.db"
    assert any(text in problem["problem"] for text in expected.split("|")), problem["problem"]
    assert "`conveyor --account local queues delete --force victim`" in victim["advice"]

    table = doctor(seeded.url)
    assert table.exit_code == 1
    assert "damaged" in table.stdout and "what to do" in table.stdout
    assert "victim (account local):" in table.stdout
    assert seeded.files() == before


def test_doctor_reports_a_corrupt_catalog(seeded: SeededDirectory) -> None:
    garble_header(seeded.catalog)

    code, report = doctor_json(seeded.url)
    assert code == 1
    (problem,) = report["catalog"]
    assert problem["file"] == "catalog.db" and "is corrupt or not a database" in problem["problem"]
    assert "restore catalog.db" in doctor(seeded.url).stdout


def test_doctor_reports_a_shard_file_no_queue_owns(seeded: SeededDirectory) -> None:
    stray = seeded.data_dir / "shards" / "0123456789abcdef0123456789abcdef.0.db"
    shutil.copyfile(seeded.shard(seeded.kept_id), stray)

    code, report = doctor_json(seeded.url)
    assert code == 1
    assert [p["file"] for p in report["stray_files"]] == [f"shards/{stray.name}"]
    assert all(q["ok"] for q in report["queues"])


def test_doctor_reports_a_damaged_snapshot_as_harmless_but_wrong(seeded: SeededDirectory) -> None:
    for path in (seeded.data_dir / "snapshot").glob("catalog_*"):
        path.write_bytes(os.urandom(path.stat().st_size))

    code, report = doctor_json(seeded.url)
    assert code == 1
    (problem,) = report["snapshot"]
    assert "nothing is lost" in problem["problem"]


def test_doctor_refuses_a_deployment_that_is_not_embedded() -> None:
    result = doctor("postgresql://127.0.0.1/test")
    assert result.exit_code == 1
    assert "doctor checks the files of an embedded deployment" in result.stderr


def test_doctor_refuses_a_directory_without_a_deployment(tmp_path: Path) -> None:
    result = doctor(f"sqlite://{tmp_path}")
    assert result.exit_code == 1 and "no Conveyor deployment" in result.stderr


def test_doctor_advice_for_a_served_queue_names_its_account(data_dir: Path) -> None:
    engine = SQLiteEngine(data_dir)
    queue_id = engine.create_queue("acc1/orders", QueueSettings()).queue_id
    engine.close()
    os.truncate(data_dir / "shards" / f"{queue_id}.0.db", 0)

    code, report = doctor_json(f"sqlite://{data_dir}")
    assert code == 1
    (queue,) = report["queues"]
    assert (queue["account_id"], queue["queue_name"]) == ("acc1", "orders")
    assert "`conveyor --account acc1 queues delete --force orders`" in queue["advice"]


def test_doctor_advice_for_a_queue_without_an_account_names_the_raw_engine(data_dir: Path) -> None:
    engine = SQLiteEngine(data_dir)
    queue_id = engine.create_queue("orders", QueueSettings()).queue_id  # only the raw engine makes these
    engine.close()
    os.truncate(data_dir / "shards" / f"{queue_id}.0.db", 0)

    code, report = doctor_json(f"sqlite://{data_dir}")
    assert code == 1
    (queue,) = report["queues"]
    assert (queue["account_id"], queue["queue_name"]) == ("", "orders")
    assert f"`conveyor.client.connect.open_engine(URL).delete_queue('{queue_id}', force=True)`" in queue["advice"]
    assert "conveyor --account" not in queue["advice"]


def test_doctor_does_not_flag_the_catalogs_tokens_and_workers(seeded: SeededDirectory) -> None:
    created = CliRunner().invoke(cli, ["--url", seeded.url, "tokens", "create", "--account", "acc1"])
    assert created.exit_code == 0, created.output
    engine = SQLiteEngine(seeded.data_dir)
    engine.record_worker(WorkerEntry("f" * 32, "host", 1, engine.clock.now_ms(), engine.clock.now_ms()))
    engine.close()
    with closing(sqlite3.connect(seeded.catalog)) as conn:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        assert {"tokens", "workers"} <= tables
        assert conn.execute("SELECT count(*) FROM workers").fetchone()[0] == 1

    code, report = doctor_json(seeded.url)
    assert code == 0 and report["ok"] is True, report
    assert [(q["account_id"], q["queue_name"]) for q in report["queues"]] == [("local", "kept"), ("local", "victim")]


def make_version_1_directory(data: Path) -> dict[str, str]:
    """A directory as Conveyor wrote it before accounts (catalog schema 1: plain queue names), with
    account local's own ``jobs`` made through a server before the upgrade; the queues' ids by name."""
    raw = SQLiteEngine(data)
    try:
        ids = {name: raw.create_queue(name, QueueSettings()).queue_id for name in ("emails", "jobs", "local/jobs")}
        raw.enqueue(ids["emails"], [NewMessage(b'"kept"', "json", 0)])
    finally:
        raw.close()
    conn = sqlite3.connect(data / "catalog.db")
    conn.execute("PRAGMA user_version = 1")
    conn.close()  # before the test notes the files: closing removes the write-ahead log
    return ids


def test_doctor_reads_a_version_1_catalog_as_opening_it_will_upgrade_it(data_dir: Path) -> None:
    make_version_1_directory(data_dir)
    url = f"sqlite://{data_dir}"
    before = {p: p.read_bytes() for p in sorted(data_dir.rglob("*")) if p.is_file()}

    code, report = doctor_json(url)
    assert code == 0 and report["ok"] is True, report
    assert report["upgrades"] == [{"file": "catalog.db", "version": 1, "upgraded_to": CATALOG_VERSION}]
    # Named as the upgrade names them: plain names move into account local, or aside into
    # `unqualified` when local has a queue of that name already.
    assert [(q["account_id"], q["queue_name"], q["backlog"]) for q in report["queues"]] == [
        ("local", "emails", 1),
        ("local", "jobs", 0),
        ("unqualified", "jobs", 0),
    ]
    table = doctor(url)
    assert table.exit_code == 0 and "All good." in table.stdout
    assert f"opening the deployment upgrades it to {CATALOG_VERSION}" in table.stdout

    assert {p: p.read_bytes() for p in sorted(data_dir.rglob("*")) if p.is_file()} == before
    with closing(sqlite3.connect(data_dir / "catalog.db")) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1


def test_doctor_advice_for_a_damaged_queue_of_a_version_1_catalog_names_it_as_upgraded(data_dir: Path) -> None:
    ids = make_version_1_directory(data_dir)
    os.truncate(data_dir / "shards" / f"{ids['jobs']}.0.db", 0)

    code, report = doctor_json(f"sqlite://{data_dir}")
    assert code == 1
    queues = by_account_and_name(report)
    assert queues["local", "emails"]["ok"] and queues["local", "jobs"]["ok"]
    moved_aside = queues["unqualified", "jobs"]
    assert moved_aside["queue_id"] == ids["jobs"] and moved_aside["ok"] is False
    assert "`conveyor --account unqualified queues delete --force jobs`" in moved_aside["advice"]


def test_doctor_reports_a_catalog_of_a_version_it_cannot_upgrade(seeded: SeededDirectory) -> None:
    conn = sqlite3.connect(seeded.catalog)
    conn.execute("PRAGMA user_version = 0")
    conn.close()

    code, report = doctor_json(seeded.url)
    assert code == 1
    (problem,) = report["catalog"]
    assert "catalog.db has schema version 0, which this Conveyor cannot upgrade" in problem["problem"]


def test_doctor_notes_a_version_1_shard_as_upgraded_on_open_not_damaged(seeded: SeededDirectory) -> None:
    shard = seeded.shard(seeded.kept_id)
    shard.unlink()
    old = sqlite3.connect(shard, isolation_level=None)
    old.executescript((Path(__file__).parent / "shard_v1.sql").read_text())
    old.execute("UPDATE stats SET backlog_count = 3")
    old.close()

    code, report = doctor_json(seeded.url)
    assert code == 0 and report["ok"] is True, report
    assert report["upgrades"] == [{"file": f"shards/{seeded.kept_id}.0.db", "version": 1, "upgraded_to": SHARD_VERSION}]
    assert by_account_and_name(report)["local", "kept"]["backlog"] == 3
