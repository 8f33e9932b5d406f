"""Cloudflare's official Python SDK's ``workflows.*`` against ``conveyor serve``: records made by a PUT
and by a worker, versions, instances created, listed (the SDK's pages and the cursor), read, driven
and deleted, and every refusal with its code, changing nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import cloudflare
import httpx
import pytest
from cloudflare import Cloudflare

import conveyor
from conveyor.server.testing import RunningServer
from tests.waiting import wait_for

from .conftest import ACCOUNT

A = {"account_id": ACCOUNT}
W = {"account_id": ACCOUNT, "workflow_name": "pipeline"}


@pytest.fixture
def app(server: RunningServer) -> Iterator[conveyor.App]:
    """A worker of the server's account running workflow ``pipeline``: a step, a wait for event
    ``go`` and a failing-or-not last step."""
    worker = conveyor.App(server.connect(ACCOUNT), grace_period=5)

    @worker.workflow("pipeline", max_steps=50)
    def pipeline(event, step):
        doubled = step.do("double", lambda: event.payload["n"] * 2)
        got = step.wait_for_event("go", type="go", timeout=600)
        if got.payload.get("fail"):
            step.do("explode", _explode, retries=conveyor.Retries(limit=0))
        return {"doubled": doubled, "got": got.payload}

    worker.start()
    try:
        yield worker
    finally:
        worker.stop(grace=5)


def _explode() -> None:
    raise ValueError("boom")


def _status(cf: Cloudflare, instance_id: str) -> str:
    return cf.workflows.instances.get(instance_id, **W).status


def _code(error: cloudflare.APIStatusError) -> int:
    return int(error.body["errors"][0]["code"])  # type: ignore[index]


def test_a_put_record_a_worker_and_versions_through_the_sdk(cf: Cloudflare, server: RunningServer) -> None:
    put = cf.workflows.update(
        "pipeline",
        class_name="Pipeline",
        script_name="pipeline-worker",
        limits={"steps": 7},
        concurrency={"limit": 2},
        default_retention={"success_retention": "1 day", "error_retention": 3_600_000},
        schedules=[{"cron": "0 * * * *"}],
        **A,
    )
    assert (put.name, put.class_name, put.script_name, put.is_deleted) == ("pipeline", "Pipeline", "pipeline-worker", 0)
    got = cf.workflows.get("pipeline", **A)
    assert got.instances["queued"] == 0 and [s.cron for s in got.schedules or []] == ["0 * * * *"]
    assert got.id == put.id and got.to_dict()["has_worker"] is False

    versions = list(cf.workflows.versions.list("pipeline", **A))
    assert [v.id for v in versions] == [put.version_id]
    version = cf.workflows.versions.get(put.version_id, workflow_name="pipeline", **A)
    assert version.limits is not None and version.limits.steps == 7
    assert version.concurrency is not None and version.concurrency.limit == 2
    assert version.default_retention is not None
    assert (version.default_retention.success_retention, version.default_retention.error_retention) == (
        86_400_000,
        3_600_000,
    )
    graph = cf.workflows.versions.graph(put.version_id, workflow_name="pipeline", **A)
    assert graph.id == put.version_id and graph.graph is None

    # A worker registering its code keeps the PUT's settings over its own (max_steps=50).
    worker = conveyor.App(server.connect(ACCOUNT), grace_period=5)
    worker.workflow("pipeline", max_steps=50)(lambda event, step: 1)
    worker.start()
    worker.stop(grace=5)
    now = cf.workflows.get("pipeline", **A)
    latest = cf.workflows.versions.list("pipeline", **A).result[0]
    assert latest.id != put.version_id and latest.limits is not None and latest.limits.steps == 7
    assert now.class_name == "Pipeline"

    listed = list(cf.workflows.list(**A))
    assert [w.name for w in listed] == ["pipeline"]
    assert list(cf.workflows.list(search="nothing", **A)) == []
    cf.workflows.delete("pipeline", **A)
    assert list(cf.workflows.list(**A)) == []
    with pytest.raises(cloudflare.NotFoundError) as gone:
        cf.workflows.get("pipeline", **A)
    assert _code(gone.value) == 13003


def test_instances_run_wait_for_an_event_and_show_their_steps(cf: Cloudflare, app: conveyor.App) -> None:
    assert [w.to_dict()["has_worker"] for w in cf.workflows.list(**A)] == [True]
    assert cf.workflows.get("pipeline", **A).to_dict()["has_worker"] is True
    created = cf.workflows.instances.create("pipeline", instance_id="i1", params=json.dumps({"n": 21}), **A)
    assert (created.id, created.status) == ("i1", "queued")
    wait_for(lambda: _status(cf, "i1") == "waiting", timeout=30, what="the instance to wait for its event")
    detail = cf.workflows.instances.get("i1", **W)
    assert detail.params == {"n": 21} and detail.version_id == created.version_id
    assert [(s.type, s.name) for s in detail.steps] == [("step", "double-1"), ("waitForEvent", "go-1")]
    first = detail.steps[0]
    assert first.output == 42 and first.success is True and len(first.attempts) == 1  # type: ignore[union-attr]
    assert first.config.retries.limit == 5  # type: ignore[union-attr]
    simple = cf.workflows.instances.get("i1", simple="true", **W)
    assert simple.steps == [] and simple.step_count == 2

    step = cf.workflows.instances.step("i1", name="double-1", type="step", **W)
    assert (step.status, step.output) == ("complete", 42)
    with pytest.raises(cloudflare.NotFoundError) as unknown_step:
        cf.workflows.instances.step("i1", name="double-2", type="step", **W)
    assert _code(unknown_step.value) == 13010

    sent = cf.workflows.instances.events.create("go", workflow_name="pipeline", instance_id="i1", body={"ok": 1}, **A)
    assert sent.instance_id == "i1"
    wait_for(lambda: _status(cf, "i1") == "complete", timeout=30, what="the instance to complete")
    done = cf.workflows.instances.get("i1", **W)
    assert done.output == {"doubled": 42, "got": {"ok": 1}} and done.success is True
    assert done.trigger.source == "api"

    # The caller's traceparent header gives the instance its trace.
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    headers = {"traceparent": f"00-{trace}-00f067aa0ba902b7-01"}
    cf.workflows.instances.create("pipeline", instance_id="traced", extra_headers=headers, **A)
    assert app.conveyor.workflow("pipeline").get("traced").status().trace_id == trace

    # An object as params (wrangler's form) is the same.
    cf.workflows.instances.create("pipeline", instance_id="i2", params={"n": 1, "x": [1]}, **A)  # type: ignore[arg-type]
    assert cf.workflows.instances.get("i2", **W).params == {"n": 1, "x": [1]}


def test_pause_resume_terminate_and_restart_from_a_step(cf: Cloudflare, app: conveyor.App) -> None:
    cf.workflows.instances.create("pipeline", instance_id="p1", params='{"n": 2}', **A)
    wait_for(lambda: _status(cf, "p1") == "waiting", timeout=30, what="the instance to wait")
    paused = cf.workflows.instances.status.edit("p1", status="pause", **W)
    assert paused.status == "paused"
    cf.workflows.instances.status.edit("p1", status="resume", **W)
    with pytest.raises(cloudflare.ConflictError) as again:
        cf.workflows.instances.status.edit("p1", status="resume", **W)
    assert _code(again.value) == 13007 and again.value.response.headers["x-should-retry"] == "false"

    cf.workflows.instances.events.create("go", workflow_name="pipeline", instance_id="p1", body={"fail": True}, **A)
    wait_for(lambda: _status(cf, "p1") == "errored", timeout=30, what="the instance to error")
    failed = cf.workflows.instances.get("p1", **W)
    assert failed.error is not None and "boom" in failed.error.message
    failing = cf.workflows.instances.step("p1", name="explode-1", type="step", **W)
    assert failing.status == "errored" and failing.error is not None and "boom" in failing.error.message
    with pytest.raises(cloudflare.ConflictError) as finished:
        cf.workflows.instances.status.edit("p1", status="terminate", **W)
    assert _code(finished.value) == 13007

    # Restarting from the failed step keeps the results before it and runs it anew.
    before = {s.name: s.start for s in failed.steps}  # type: ignore[union-attr]
    cf.workflows.instances.status.edit("p1", status="restart", from_={"name": "explode", "count": 1, "type": "do"}, **W)
    wait_for(lambda: _status(cf, "p1") == "errored", timeout=30, what="the restarted instance to error again")
    again_steps = cf.workflows.instances.get("p1", **W).steps
    assert [s.name for s in again_steps] == ["double-1", "go-1", "explode-1"]  # type: ignore[union-attr]
    assert [s.start for s in again_steps[:2]] == [before["double-1"], before["go-1"]]  # type: ignore[union-attr]
    assert again_steps[2].start != before["explode-1"]  # type: ignore[union-attr]
    with pytest.raises(cloudflare.BadRequestError) as bad_type:
        cf.workflows.instances.status.edit(
            "p1",
            status="restart",
            from_={"name": "go", "type": "rollback"},
            **W,  # type: ignore[typeddict-item]
        )
    assert _code(bad_type.value) == 13008
    cf.workflows.instances.create("pipeline", instance_id="p2", params='{"n": 2}', **A)
    wait_for(lambda: _status(cf, "p2") == "waiting", timeout=30, what="the second instance to wait")
    terminated = cf.workflows.instances.status.edit("p2", status="terminate", **W)
    assert terminated.status == "terminated"


def test_the_sdks_pages_end_with_an_empty_page_and_the_cursor_reaches_every_instance(
    cf: Cloudflare, server: RunningServer, token: str
) -> None:
    cf.workflows.update("pipeline", class_name="P", script_name="p", **A)
    made = list(
        cf.workflows.instances.bulk("pipeline", body=[{"instance_id": f"b{n}", "params": "{}"} for n in range(5)], **A)
    )
    assert [i.id for i in made] == [f"b{n}" for n in range(5)]
    paged = list(cf.workflows.instances.list("pipeline", per_page=2, direction="asc", **A))
    assert [i.id for i in paged] == [f"b{n}" for n in range(5)]
    assert all(i.status == "queued" and i.workflow_id == made[0].workflow_id for i in paged)
    assert list(cf.workflows.instances.list("pipeline", status="running", **A)) == []

    url = f"{server.url}/client/v4/accounts/{ACCOUNT}/workflows/pipeline/instances"
    headers = {"authorization": f"Bearer {token}"}
    seen, cursor = [], None
    while True:
        params = {"per_page": "2", "direction": "desc", **({"cursor": cursor} if cursor else {})}
        answer = httpx.get(url, params=params, headers=headers).json()
        seen += [i["id"] for i in answer["result"]]
        assert answer["result_info"]["total_count"] == 5
        cursor = answer["result_info"].get("cursor")
        if not cursor:
            break
    assert seen == [f"b{n}" for n in reversed(range(5))]
    assert httpx.get(url + "/", headers=headers).json()["result_info"]["count"] == 5  # wrangler's "latest"
    past = httpx.get(url, params={"page": "9", "per_page": "2"}, headers=headers).json()
    assert past["success"] is True and past["result"] == []


def test_batch_delete_and_terminate_all(cf: Cloudflare, server: RunningServer, token: str) -> None:
    cf.workflows.update("pipeline", class_name="P", script_name="p", **A)
    cf.workflows.instances.bulk("pipeline", body=[{"instance_id": f"t{n}"} for n in range(4)], **A)
    url = f"{server.url}/client/v4/accounts/{ACCOUNT}/workflows/pipeline/instances"
    headers = {"authorization": f"Bearer {token}"}
    deleted = httpx.post(url + "/batch/delete", json={"instances": ["t0", "nope", "bad id"]}, headers=headers)
    result = deleted.json()["result"]
    assert result["deleted"] == [{"id": "t0"}]
    assert [(e["id"], e["code"]) for e in result["errors"]] == [("nope", 13004), ("bad id", 13002)]
    started = httpx.put(url + "/terminate", params={"status": "queued"}, headers=headers)
    assert started.json()["result"] == {"status": "ok"}
    assert {i.status for i in cf.workflows.instances.list("pipeline", **A)} == {"terminated"}
    assert cf.workflows.get("pipeline", **A).instances["terminated"] == 3


def test_refusals_carry_a_code_and_change_nothing(cf: Cloudflare) -> None:
    cf.workflows.update("pipeline", class_name="P", script_name="p", **A)
    cf.workflows.instances.create("pipeline", instance_id="taken", **A)

    def refused(kind: type[cloudflare.APIStatusError], code: int, call: object) -> cloudflare.APIStatusError:
        with pytest.raises(kind) as caught:
            call()  # type: ignore[operator]
        assert _code(caught.value) == code, caught.value.body
        return caught.value

    taken = refused(
        cloudflare.ConflictError, 13005, lambda: cf.workflows.instances.create("pipeline", instance_id="taken", **A)
    )
    assert taken.response.headers["x-should-retry"] == "false"
    refused(
        cloudflare.BadRequestError, 13002, lambda: cf.workflows.instances.create("pipeline", instance_id="-bad", **A)
    )
    reserved = "cf_" + "a" * 64
    refused(
        cloudflare.BadRequestError, 13002, lambda: cf.workflows.instances.create("pipeline", instance_id=reserved, **A)
    )
    huge = json.dumps({"x": "y" * (1 << 20)})
    refused(cloudflare.APIStatusError, 13006, lambda: cf.workflows.instances.create("pipeline", params=huge, **A))
    refused(
        cloudflare.BadRequestError,
        13001,
        lambda: cf.workflows.update("bad name!", class_name="P", script_name="p", **A),
    )
    refused(
        cloudflare.BadRequestError,
        13008,
        lambda: cf.workflows.update("pipeline", class_name="P", script_name="p", limits={"steps": 0}, **A),
    )
    refused(
        cloudflare.BadRequestError,
        13008,
        lambda: cf.workflows.update("pipeline", class_name="P", script_name="p", schedules=[{"cron": "nope"}], **A),
    )
    refused(cloudflare.NotFoundError, 13009, lambda: cf.workflows.versions.get("0" * 36, workflow_name="pipeline", **A))
    refused(cloudflare.NotFoundError, 13004, lambda: cf.workflows.instances.get("missing", **W))
    refused(cloudflare.NotFoundError, 13003, lambda: cf.workflows.instances.create("other", **A))
    # A batch with one taken id creates none of it.
    refused(
        cloudflare.ConflictError,
        13005,
        lambda: cf.workflows.instances.bulk("pipeline", body=[{"instance_id": "fresh"}, {"instance_id": "taken"}], **A),
    )
    big_event = {"x": "y" * (1 << 20)}
    refused(
        cloudflare.APIStatusError,
        13006,
        lambda: cf.workflows.instances.events.create(
            "go", workflow_name="pipeline", instance_id="taken", body=big_event, **A
        ),
    )
    assert [i.id for i in cf.workflows.instances.list("pipeline", **A)] == ["taken"]
    version = cf.workflows.get("pipeline", **A).to_dict()["version_id"]
    assert cf.workflows.versions.get(version, workflow_name="pipeline", **A).limits.steps == 10_000  # type: ignore[union-attr]


def test_unknown_fields_unsupported_options_and_bad_paths_are_refused(
    cf: Cloudflare, server: RunningServer, token: str
) -> None:
    cf.workflows.update("pipeline", class_name="P", script_name="p", **A)
    base = f"{server.url}/client/v4/accounts/{ACCOUNT}/workflows"
    headers = {"authorization": f"Bearer {token}"}

    def refused(method: str, path: str, status: int, code: int, text: str, **kwargs: Any) -> None:
        answer = httpx.request(method, base + path, headers=headers, **kwargs)
        assert answer.status_code == status, answer.text
        error = answer.json()["errors"][0]
        assert error["code"] == code and text in error["message"], error

    refused("PUT", "/pipeline", 400, 10207, "colour", json={"class_name": "P", "script_name": "p", "colour": 1})
    refused("PUT", "/pipeline", 400, 10207, "class_name", json={"script_name": "p"})
    refused(
        "PUT",
        "/pipeline",
        400,
        10207,
        "jurisdiction",
        json={"class_name": "P", "script_name": "p", "jurisdiction": "eu"},
    )
    refused(
        "POST",
        "/pipeline/instances",
        400,
        10207,
        "instance_retention",
        json={"instance_retention": {"success_retention": 1}},
    )
    refused("POST", "/pipeline/instances", 400, 10207, "location_hint", json={"location_hint": "mars"})
    refused("GET", "/bad%20name", 400, 13001, "invalid workflow name")
    refused("GET", "/pipeline/instances/-bad", 400, 13002, "invalid instance id")
    refused("GET", "/pipeline/instances", 400, 10207, "status", params={"status": "sleeping"})
    refused("GET", "/pipeline/instances", 400, 10207, "date_start", params={"date_start": "yesterday"})
    refused("GET", "/pipeline/instances", 400, 10207, "per_page", params={"per_page": "0"})
    refused("GET", "/pipeline/instances", 400, 10207, "unknown query parameter", params={"sort": "id"})
    cf.workflows.instances.create("pipeline", instance_id="x", **A)
    refused(
        "PATCH", "/pipeline/instances/x/status", 400, 10207, "rollback", json={"status": "terminate", "rollback": True}
    )
    refused("PATCH", "/pipeline/instances/x/status", 400, 10207, "status", json={"status": "sleep"})
    refused("PATCH", "/pipeline/instances/x/status", 409, 13007, "nothing to resume", json={"status": "resume"})
    refused(
        "PATCH",
        "/pipeline/instances/x/status",
        400,
        13008,
        "count is 0",
        json={"status": "restart", "from": {"name": "a", "count": 0}},
    )
    refused("POST", "/pipeline/instances/x/events/go", 400, 10208, "not JSON", content=b"{nope")
    refused("POST", "/pipeline/instances/batch/delete", 400, 10207, "1 to 100", json={"instances": []})
    assert cf.workflows.instances.get("x", **W).status == "queued"
    assert cf.workflows.get("pipeline", **A).class_name == "P"
