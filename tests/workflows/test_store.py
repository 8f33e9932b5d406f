"""The workflow store's files and records: workflows.db beside the queues, refused when foreign or
newer; workflow records keep their creation time and take a new version id on new code."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import conveyor
from conveyor.workflows.client import workflow_store
from conveyor.workflows.databases import SQLITE_FILE, SQLITE_VERSION
from conveyor.workflows.model import WorkflowSettings
from tests.workflows.support import deployment_side


def test_records_keep_their_creation_time_and_take_new_versions(cv) -> None:
    store = workflow_store(deployment_side(cv))
    account = cv.deployment.account
    first = store.put_workflow(account, "w", WorkflowSettings(max_steps=5), "v1", 1000)
    second = store.put_workflow(account, "w", WorkflowSettings(max_steps=6), "v2", 2000)
    assert (second.created_ms, second.modified_ms, second.version_id) == (1000, 2000, "v2")
    assert second.settings.max_steps == 6 and first.settings.max_steps == 5
    assert [r.name for r in store.list_workflows(account)] == ["w"]
    assert store.list_workflows("another-account") == []
    assert store.get_workflow("another-account", "w") is None


def test_a_new_version_of_the_code_gets_a_new_version_id(cv) -> None:
    def register(fn) -> str:
        app = conveyor.App(cv)
        app.workflow("versioned")(fn)
        app.start()
        app.stop(grace=1)
        return cv.workflow("versioned").record.version_id

    one = register(lambda event, step: 1)
    assert register(lambda event, step: 1) == one
    two = register(lambda event, step: 2)
    assert two != one and len(two) == 36
    inst = cv.workflow("versioned").create()
    assert inst.status().version_id == two


def _sqlite_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def test_workflows_db_lives_in_the_deployment_directory(tmp_path: Path) -> None:
    with conveyor.connect(f"sqlite://{_sqlite_dir(tmp_path)}") as cv:
        workflow_store(cv).put_workflow("local", "w", WorkflowSettings(), "v", 1)
    path = _sqlite_dir(tmp_path) / SQLITE_FILE
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SQLITE_VERSION,)
        assert db.execute("SELECT name FROM workflows").fetchall() == [("w",)]


def test_an_instance_of_a_version_1_file_is_found_by_its_trace_after_the_upgrade(tmp_path: Path) -> None:
    directory = _sqlite_dir(tmp_path)
    directory.mkdir()
    path = directory / SQLITE_FILE
    with sqlite3.connect(path) as db:
        db.executescript((Path(__file__).parent / "workflows_v1.sql").read_text())
        db.execute(
            "INSERT INTO workflow_instances (account, workflow, id, status, params, trace_id, version_id, epoch,"
            " created_ms, modified_ms) VALUES ('local', 'w', 'old', 'queued', '{}', ?, 'v', 0, 1, 1)",
            ("ab" * 16,),
        )
    db.close()
    with conveyor.connect(f"sqlite://{directory}") as cv:
        store = workflow_store(cv)
        (row,) = store.instances_by_trace("local", "ab" * 16, 10)
        assert (row.id, row.traceparent, row.origin) == ("old", None, None)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SQLITE_VERSION,)
        indexes = {r[1] for r in db.execute("PRAGMA index_list(workflow_instances)")}
        assert "workflow_instances_by_trace" in indexes
    db.close()


def test_a_newer_or_foreign_workflows_db_is_refused_and_left_alone(tmp_path: Path) -> None:
    directory = _sqlite_dir(tmp_path)
    with conveyor.connect(f"sqlite://{directory}") as cv:
        workflow_store(cv)
    path = directory / SQLITE_FILE
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SQLITE_VERSION + 1}")
    with conveyor.connect(f"sqlite://{directory}") as cv, pytest.raises(conveyor.CorruptStorage) as newer:
        workflow_store(cv)
    assert f"schema version {SQLITE_VERSION + 1}" in str(newer.value)
    path.unlink()
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE theirs (x)")
    before = path.read_bytes()
    with conveyor.connect(f"sqlite://{directory}") as cv, pytest.raises(conveyor.CorruptStorage):
        workflow_store(cv)
    assert path.read_bytes() == before


V1_SCHEMA = (Path(__file__).parent / "workflows_v1.sql").read_text()


def test_a_version_1_workflows_db_is_upgraded_with_its_instances(tmp_path: Path) -> None:
    directory = _sqlite_dir(tmp_path)
    directory.mkdir()
    with sqlite3.connect(directory / SQLITE_FILE) as old:
        old.executescript(V1_SCHEMA)
        old.execute(
            "INSERT INTO workflows VALUES ('local', 'w', ?, 'v1', 1000, 2000, 5, 6)",
            ('{"script_name": "m:f", "schedules": ["*/5 * * * *"], "max_steps": 10}',),
        )
        old.execute("INSERT INTO workflow_instance_ids VALUES ('local', 'w', 'old')")
        old.execute(
            "INSERT INTO workflow_instances (account, workflow, id, status, params, trace_id, version_id, epoch, "
            "created_ms, modified_ms) VALUES ('local', 'w', 'old', 'queued', '{\"n\": 1}', ?, 'v1', 0, 7, 7)",
            ("0" * 32,),
        )
    with conveyor.connect(f"sqlite://{directory}") as cv:
        store = workflow_store(cv)
        row = store.get_instance("local", "w", "old")
        assert row is not None and (row.status, row.params, row.scheduled_ms) == ("queued", '{"n": 1}', None)
        assert store.get_workflow("local", "w").settings.schedules == ("*/5 * * * *",)
        assert store.schedules() == [], "its ticks count from its next registration"
        store.put_workflow("local", "w", store.get_workflow("local", "w").settings, "v2", 60_000)
        assert [(s.workflow, s.last_tick_ms) for s in store.schedules()] == [("w", 60_000)]
    with sqlite3.connect(directory / SQLITE_FILE) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SQLITE_VERSION,)
