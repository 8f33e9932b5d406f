"""Workflow records: a PUT (``cv.put_workflow``) makes one without code and its settings override the
code's; versions are kept; a workflow is deleted with its instances; counts per status; a SQLite
file of version 1 is upgraded."""

from __future__ import annotations

import asyncio
import datetime
import sqlite3
import time
from pathlib import Path

import pytest

import conveyor
from conveyor.workflows import InstanceExists, InvalidStepConfig, WorkflowVersionNotFound
from conveyor.workflows.client import workflow_store
from conveyor.workflows.databases import SQLITE_FILE, SQLITE_VERSION
from tests.workflows.support import deployment_side, running, settled


def _three_steps(app: conveyor.App, name: str = "wf") -> None:
    @app.workflow(name, max_steps=10, concurrency=3)
    def run(event, step):
        for n in range(3):
            step.do(f"s{n}", lambda n=n: n)
        return "done"


def test_a_put_makes_a_workflow_whose_instances_wait_for_a_worker(cv, app) -> None:
    wf = cv.put_workflow("wf", class_name="Pipeline", script_name="pipeline")
    assert (wf.record.class_name, wf.record.script_name, wf.record.code_settings) == ("Pipeline", "pipeline", None)
    assert not wf.has_worker()
    inst = wf.create(id="early")
    time.sleep(0.3)
    assert inst.status().status == "queued"
    assert wf.instance_counts() == {s: int(s == "queued") for s in conveyor.workflows.model.STATUSES}
    _three_steps(app)
    with running(app):
        assert cv.workflow("wf").has_worker()
        assert settled(inst, "complete").output == "done"
    assert cv.workflow("wf").instance_counts()["complete"] == 1


def test_put_settings_override_the_codes_and_each_change_is_a_version(cv, app) -> None:
    _three_steps(app)
    app.start()
    app.stop(grace=1)
    code = cv.workflow("wf").record
    assert code.settings == code.code_settings and code.version_id == code.code_version
    assert (code.class_name, code.script_name) == ("_three_steps.<locals>.run", __name__)

    put = cv.put_workflow("wf", max_steps=2, success_retention="1 day", schedules=["0 * * * *"])
    record = put.record
    assert (record.settings.max_steps, record.settings.concurrency) == (2, 3)  # what the PUT left is the code's
    assert record.settings.success_retention_ms == 86_400_000 and record.settings.schedules == ("0 * * * *",)
    assert record.code_settings == code.code_settings and record.version_id != code.version_id
    assert record.created_ms == code.created_ms

    versions = put.versions()
    assert [v.id for v in versions] == [record.version_id, code.version_id]
    assert put.version(code.version_id).settings.max_steps == 10 and versions[0].has_code
    with pytest.raises(WorkflowVersionNotFound) as unknown:
        put.version("0" * 36)
    assert unknown.value.code == 13009 and unknown.value.status == 404

    # A worker started now runs under the settings in force: two steps at most.
    app2 = conveyor.App(cv, grace_period=5)
    _three_steps(app2)
    with running(app2):
        inst = cv.workflow("wf").create()
        failed = settled(inst, "errored")
    assert "2" in failed.error["message"]
    assert cv.workflow("wf").record.version_id == record.version_id  # the same code and overrides


def test_a_put_of_no_settings_gives_the_code_back_its_version(cv, app) -> None:
    _three_steps(app)
    app.start()
    app.stop(grace=1)
    first = cv.workflow("wf").record.version_id
    assert cv.put_workflow("wf", concurrency=1).record.version_id != first
    again = cv.put_workflow("wf").record
    assert again.version_id == first and again.settings.concurrency == 3
    assert cv.workflow("wf").versions()[0].id == first


def test_bad_settings_are_refused_and_change_nothing(cv) -> None:
    cv.put_workflow("wf", max_steps=5)
    before = cv.workflow("wf").record
    for settings, text in (
        ({"max_steps": 0}, "max_steps"),
        ({"concurrency": 10**9}, "concurrency"),
        ({"schedules": ["* * *"]}, "5"),
        ({"success_retention": -1}, "success_retention"),
        ({"class_name": ""}, "class_name"),
    ):
        with pytest.raises(InvalidStepConfig, match=text) as caught:
            cv.put_workflow("wf", **settings)
        assert caught.value.code == 13008
    with pytest.raises(conveyor.workflows.InvalidWorkflowName):
        cv.put_workflow("bad name")
    assert cv.workflow("wf").record == before
    assert [w.name for w in cv.list_workflows()] == ["wf"]


def test_deleting_a_workflow_deletes_its_instances_and_versions_but_keeps_their_ids(cv) -> None:
    wf = cv.put_workflow("wf")
    wf.create(id="a")
    wf.create(id="b")
    cv.put_workflow("other").create(id="a")
    assert wf.instance_counts()["queued"] == 2
    wf.delete()
    with pytest.raises(conveyor.WorkflowNotFound):
        cv.workflow("wf")
    with pytest.raises(conveyor.WorkflowNotFound):
        wf.delete()
    assert [w.name for w in cv.list_workflows()] == ["other"]
    again = cv.put_workflow("wf")
    assert again.list_instances().instances == [] and len(again.versions()) == 1
    with pytest.raises(InstanceExists):
        again.create(id="a")
    assert cv.workflow("other").get("a").status().status == "queued"


def test_the_async_client_has_the_same_workflow_methods(cv) -> None:
    async def use() -> None:
        acv = conveyor.AsyncConveyor(cv)
        wf = await acv.put_workflow("wf", max_steps=7)
        assert wf.record.settings.max_steps == 7
        await wf.create(id="x")
        assert (await wf.instance_counts())["queued"] == 1
        assert [w.name for w in await acv.list_workflows()] == ["wf"]
        versions = await wf.versions()
        assert (await wf.version(versions[0].id)).settings.max_steps == 7
        assert not await wf.has_worker()
        assert (await wf.reload()).record == wf.record
        await wf.delete()
        assert await acv.list_workflows() == []

    asyncio.run(use())


def test_a_version_1_workflows_db_is_upgraded_with_its_records_as_the_codes_and_one_version(tmp_path: Path) -> None:
    directory = tmp_path / "data"
    directory.mkdir()
    schema = (Path(__file__).parent / "workflows_v1.sql").read_text()
    settings = '{"script_name": "jobs:download", "schedules": [], "max_steps": 9, "concurrency": null, '
    settings += '"success_retention_ms": 1000, "error_retention_ms": 2000}'
    with sqlite3.connect(directory / SQLITE_FILE) as db:
        db.executescript(schema)
        db.execute("INSERT INTO workflows VALUES ('local', 'old', ?, 'v-old', 1000, 2000, 5, 6)", (settings,))
    with conveyor.connect(f"sqlite://{directory}") as cv:
        record = cv.workflow("old").record
        assert record.settings.max_steps == 9 and record.code_settings == record.settings
        assert (record.version_id, record.code_version, record.class_name, record.script_name) == (
            "v-old",
            "v-old",
            "download",
            "jobs",
        )
        assert [(v.id, v.created_ms) for v in cv.workflow("old").versions()] == [("v-old", 6)]
        assert workflow_store(cv).instance_counts("local", "old") == {}
    with sqlite3.connect(directory / SQLITE_FILE) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SQLITE_VERSION,)


def test_schedules_a_put_gives_are_ticked_and_a_put_of_none_stops_them(cv) -> None:
    store = workflow_store(deployment_side(cv))
    cv.put_workflow("wf", schedules=["*/5 * * * *"])
    assert [(s.workflow, s.schedules) for s in store.schedules()] == [("wf", ("*/5 * * * *",))]
    cv.put_workflow("wf", schedules=[])
    assert store.schedules() == []
    cv.put_workflow("wf", schedules="0 * * * *")
    cv.workflow("wf").delete()
    assert store.schedules() == []


def test_an_all_or_none_batch_with_a_taken_or_bad_id_creates_none(cv) -> None:
    wf = cv.put_workflow("wf")
    wf.create(id="taken")
    with pytest.raises(InstanceExists):
        wf.create_batch([{"id": "fresh"}, {"id": "taken"}], all_or_none=True)
    with pytest.raises(conveyor.workflows.InvalidInstanceId):
        wf.create_batch([{"id": "fresh"}, {"id": "-bad"}], all_or_none=True)
    assert [i.id for i in wf.list_instances().instances] == ["taken"]
    assert wf.instance_counts(date_start=datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC))["queued"] == 1
    assert wf.instance_counts(date_end=datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC))["queued"] == 0
    made = wf.create_batch([{"id": "fresh"}, {"id": "other"}], all_or_none=True)
    assert [i.id for i in made.created] == ["fresh", "other"]
