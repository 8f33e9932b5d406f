"""The workflow store over HTTP: a worker process of a real ``conveyor serve``, the tokens that may
call the store's routes, and the refusals of what the Python API would not have written."""

from __future__ import annotations

import inspect
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import conveyor
from conveyor.server.testing import RunningServer, running_server
from conveyor.workflows.remote import METHODS, PATH, from_wire, to_wire
from conveyor.workflows.store import WorkflowStore
from tests.server.process import serve_process
from tests.waiting import wait_for

ACCOUNT = "acc1"
MODULE = """
import conveyor

app = conveyor.App()


@app.workflow("remote-doubler")
def doubler(event, step):
    value = step.do("double", lambda: event.payload * 2)
    got = step.wait_for_event("go", type="go", timeout=60)
    return value + got.payload
"""
# The coordinator's work over every account: never a remote process's to call.
DEPLOYMENT_ONLY = {"prune", "overdue", "requeue_orphan", "schedules", "start_tick", "owed_wakeups", "close"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningServer]:
    with running_server(f"sqlite://{tmp_path / 'data'}") as running:
        yield running


def call(server: RunningServer, secret: str, method: str, body: object, account: str = ACCOUNT) -> httpx.Response:
    path = PATH.format(account_id=account, method=method)
    return httpx.post(server.url + path, json=body, headers={"authorization": f"Bearer {secret}"})


def test_a_worker_process_of_a_server_runs_workflows_and_a_remote_client_drives_them(tmp_path: Path) -> None:
    (tmp_path / "remotewf.py").write_text(MODULE)
    with serve_process(tmp_path / "data", ACCOUNT) as served:
        env = {
            **os.environ,
            "CONVEYOR_URL": served.url,
            "CONVEYOR_TOKEN": served.token,
            "CONVEYOR_ACCOUNT_ID": ACCOUNT,
            "PYTHONPATH": str(tmp_path),
        }
        log = tmp_path / "worker.log"
        with log.open("wb") as out:
            worker = subprocess.Popen(
                [str(Path(sys.executable).with_name("conveyor")), "worker", "remotewf:app"],
                env=env,
                stdout=out,
                stderr=out,
            )
        try:
            with conveyor.connect(served.url, token=served.token, account_id=ACCOUNT) as cv:
                wf = wait_for(lambda: _workflow(cv), timeout=30, what="the worker to register the workflow")
                inst = wf.create(params=20, id="over-http")
                wait_for(lambda: inst.status().status == "waiting", timeout=30, what="the instance to wait")
                inst.send_event("go", 2)
                wait_for(lambda: inst.status().status == "complete", timeout=30, what="the instance to complete")
                status = inst.status()
                assert status.output == 42
                assert [(s.name, s.type, s.output) for s in status.steps] == [
                    ("double-1", "step", 40),
                    (
                        "go-1",
                        "waitForEvent",
                        {"type": "go", "payload": 2, "timestamp": status.steps[1].output["timestamp"]},
                    ),
                ]
                assert [q.queue_name for q in cv.list_queues()] == []  # its internal queue stays hidden
        finally:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(20) == 0, log.read_text()


def _workflow(cv: conveyor.Conveyor) -> conveyor.workflows.Workflow | None:
    try:
        return cv.workflow("remote-doubler")
    except conveyor.WorkflowNotFound:
        return None


def test_a_token_reaches_its_own_account_and_a_read_only_one_only_reads(server: RunningServer) -> None:
    secret, _ = server.tokens.create(ACCOUNT)
    reader, _ = server.tokens.create(ACCOUNT, read_only=True)
    scoped, _ = server.tokens.create(ACCOUNT, queues=("some-queue",))
    assert call(server, secret, "list_workflows", {}).json()["result"] == []
    assert call(server, reader, "list_workflows", {}).status_code == 200
    assert call(server, reader, "internal_queue", {"workflow": "w"}).status_code == 403
    assert call(server, scoped, "list_workflows", {}).status_code == 403
    assert call(server, secret, "list_workflows", {}, account="acc2").status_code == 403
    assert call(server, "not-a-token", "list_workflows", {}).status_code in (401, 403)


def test_refusals_name_the_problem_and_change_nothing(server: RunningServer) -> None:
    secret, _ = server.tokens.create(ACCOUNT)
    assert call(server, secret, "internal_queue", {"workflow": "w"}).status_code == 200
    created = {"id": "ok", "params": "1", "trace_id": "0" * 32, "traceparent": None, "origin": None}

    def refused(method: str, body: object, status: int, text: str) -> None:
        response = call(server, secret, method, body)
        assert response.status_code == status, response.text
        assert text in response.json()["errors"][0]["message"]

    refused("create_instances", {"workflow": "w", "version_id": "v", "items": [created], "now_ms": 1, "x": 1}, 400, "x")
    refused("create_instances", {"workflow": "w", "version_id": "v", "now_ms": 1}, 400, "'items'")
    refused("create_instances", {"workflow": "w", "version_id": "v", "items": "no", "now_ms": 1}, 400, "items")
    bad_id = {**created, "id": "cf_" + "a" * 64}
    refused("create_instances", {"workflow": "w", "version_id": "v", "items": [bad_id], "now_ms": 1}, 400, "reserved")
    huge = {**created, "params": '"' + "x" * (1 << 20) + '"'}
    refused("create_instances", {"workflow": "w", "version_id": "v", "items": [huge], "now_ms": 1}, 413, "1 MiB")
    refused("create_instances", {"workflow": "w~x", "version_id": "v", "items": [created], "now_ms": 1}, 400, "name")
    refused("create_instances", {"workflow": "w", "version_id": "v", "items": [{"id": "a"}], "now_ms": 1}, 400, "lacks")
    traced = {**created, "trace_id": "a" * 32, "traceparent": "00-" + "b" * 32 + "-" + "c" * 16 + "-01"}
    refused("create_instances", {"workflow": "w", "version_id": "v", "items": [traced], "now_ms": 1}, 400, "not of")
    malformed = {**traced, "traceparent": "00-nope"}
    refused("create_instances", {"workflow": "w", "version_id": "v", "items": [malformed], "now_ms": 1}, 400, "W3C")
    origin = {**created, "origin": "{not json"}
    refused("create_instances", {"workflow": "w", "version_id": "v", "items": [origin], "now_ms": 1}, 400, "JSON")
    refused("instances_by_trace", {"trace_id": "XYZ", "limit": 10}, 400, "32 lowercase hex")
    refused("instances_by_trace", {"trace_id": "a" * 32, "limit": 5000}, 400, "limit")
    refused("internal_queue", {"workflow": "no/such"}, 400, "invalid workflow name")
    refused("put_workflow_overrides", {"name": "w", "overrides": {"max_steps": 0}, "now_ms": 1}, 400, "lacks")
    overrides = {
        "class_name": None,
        "script_name": None,
        "schedules": ["* * *"],
        "max_steps": None,
        "concurrency": None,
        "success_retention_ms": None,
        "error_retention_ms": None,
    }
    refused("put_workflow_overrides", {"name": "w", "overrides": overrides, "now_ms": 1}, 400, "5")
    overrides |= {"schedules": None, "max_steps": 0}
    refused("put_workflow_overrides", {"name": "w", "overrides": overrides, "now_ms": 1}, 400, "max_steps")
    assert call(server, secret, "list_workflows", {}).json()["result"] == []
    refused("get_instance", {"workflow": "w", "instance_id": 5}, 400, "a string")
    add = {"counter": "c", "n": 1, "key": None, "now_ms": 1}
    refused("counter_add", {**add, "counter": "-c"}, 400, "invalid counter name")
    refused("counter_add", {**add, "n": 2**60}, 400, "whole number from -2^53 to 2^53")
    refused("counter_add", {**add, "key": ""}, 400, "key is 1 to 200 characters")
    notify = {"counter": "c", "workflow": "w", "instance_id": "ok", "event_type": "", "now_ms": 1}
    refused("counter_notify", notify, 400, "event type")
    refused("counter_notify", {**notify, "event_type": "t"}, 404, "no instance 'ok'")
    refused("wakeups_sent", {"seqs": list(range(1001))}, 400, "the limit is 1000")
    assert call(server, secret, "counter_value", {"counter": "c"}).json()["result"] == 0
    response = call(server, secret, "get_instance", {"workflow": "w", "instance_id": "ok"})
    assert response.status_code == 200 and response.json()["result"] is None  # nothing was created
    for method in DEPLOYMENT_ONLY:
        assert call(server, secret, method, {}).status_code == 404, method


def test_every_account_method_of_the_store_is_reachable_or_declared_deployment_only() -> None:
    taking_account = {
        name
        for name, fn in inspect.getmembers(WorkflowStore, inspect.isfunction)
        if list(inspect.signature(fn).parameters)[1:2] == ["account"]
    }
    assert taking_account - DEPLOYMENT_ONLY == set(METHODS), "a store method is missing from remote.METHODS"


def test_values_cross_the_wire_as_they_were() -> None:
    from conveyor.workflows.errors import InstanceExists
    from conveyor.workflows.model import InstanceRow

    row = InstanceRow(
        "a", "w", "i", "queued", "1", None, None, "0" * 32, "v", 3, None, None, None, None, None, 1, 2, None, None,
        scheduled_ms=5, traceparent="00-" + "0" * 32 + "-" + "1" * 16 + "-01", origin='{"queue": "q", "message": "m"}',
    )  # fmt: skip
    back = from_wire(to_wire([row, InstanceExists("taken")]), list[InstanceRow | conveyor.ConveyorError])
    assert back[0] == row
    assert isinstance(back[1], InstanceExists) and back[1].message == "taken"
    assert from_wire([True, None], tuple[bool, InstanceRow | None]) == (True, None)
