"""``conveyor doctor`` on real damaged files: it names each damaged file and the queue it belongs
to, says what to do, exits 1 when anything is wrong and 0 when nothing is, and changes nothing."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from seeded_storage import SeededDirectory

from conveyor.cli.main import cli
from conveyor.engine.sqlite import SQLiteEngine
from conveyor.model import QueueSettings

PAGE = 8192


def doctor(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--url", url, "doctor", *args], catch_exceptions=False)


def doctor_json(url: str) -> tuple[int, dict[str, Any]]:
    result = doctor(url, "--json")
    return result.exit_code, json.loads(result.stdout)


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
    assert [(q["queue_name"], q["ok"], q["backlog"]) for q in report["queues"]] == [
        ("kept", True, 100),
        ("victim", True, 100),
    ]
    table = doctor(seeded.url)
    assert table.exit_code == 0 and "All good." in table.stdout

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
    queues = {q["queue_name"]: q for q in report["queues"]}
    assert queues["kept"]["ok"] is True and queues["kept"]["backlog"] == 100
    victim = queues["victim"]
    assert victim["ok"] is False and victim["backlog"] is None
    (problem,) = victim["problems"]
    assert problem["file"] == f"shards/{seeded.victim_id}.0.db"
    assert any(text in problem["problem"] for text in expected.split("|")), problem["problem"]
    assert "conveyor queues delete --force victim" in victim["advice"]

    table = doctor(seeded.url)
    assert table.exit_code == 1
    assert "damaged" in table.stdout and "what to do" in table.stdout
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
    assert queue["queue_name"] == "acc1/orders"
    assert "`conveyor --account acc1 queues delete --force orders`" in queue["advice"]
