"""``conveyor workflows ...`` as wrangler's commands: list, describe, trigger and delete
workflows; list, describe (the step timeline), pause, resume, terminate, restart and send events
to instances; tables and --json; on an embedded deployment and against ``conveyor serve``."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

import conveyor
from conveyor.cli.main import cli
from conveyor.server.testing import running_server
from tests.workflows.support import running, settled

from .support import Cli


def _app(client: conveyor.Conveyor) -> conveyor.App:
    app = conveyor.App(client, grace_period=5)
    tries: list[int] = []

    def flaky() -> dict:
        tries.append(1)
        if len(tries) == 1:
            raise RuntimeError("first try fails")
        return {"tries": len(tries)}

    @app.workflow("pipeline")
    def pipeline(event, step):
        got = step.do("fetch", lambda: {"name": event.payload["name"]})
        again = step.do("flaky", flaky, retries=conveyor.Retries(limit=2, delay=0))
        done = step.wait_for_event("go", type="go", timeout="1 hour")
        return {"got": got, "again": again, "event": done.payload}

    return app


def test_trigger_list_describe_and_delete_a_workflow(run: Cli, client: conveyor.Conveyor) -> None:
    client.put_workflow("nightly", script_name="jobs", class_name="Nightly", schedules=["0 3 * * *"])
    created = run.json("workflows", "trigger", "nightly", '{"day": 1}', "--id", "first")
    assert created["id"] == "first" and created["status"] == "queued" and len(created["trace_id"]) == 32
    assert "Created instance" in run.ok("workflows", "trigger", "nightly").stdout

    (listed,) = run.json("workflows", "list")
    assert listed["name"] == "nightly" and listed["script_name"] == "jobs" and listed["class_name"] == "Nightly"
    assert listed["instances"]["queued"] == 2 and listed["has_worker"] is False
    assert [s["cron"] for s in listed["schedules"]] == ["0 3 * * *"]
    table = run.ok("workflows", "list").stdout
    assert "nightly" in table and "2 queued" in table and "no worker" in table
    assert run.json("workflows", "list", "--page", "2") == []

    described = run.json("workflows", "describe", "nightly")
    assert described["version_id"] == described["versions"][0]["id"]
    assert "Versions" in run.ok("workflows", "describe", "nightly").stdout

    aborted = run("workflows", "delete", "nightly", input="nope\n")
    assert aborted.exit_code == 1 and "delete aborted" in aborted.stderr
    assert client.workflow("nightly").instance_counts()["queued"] == 2, "an aborted delete deletes nothing"
    assert run.json("workflows", "delete", "nightly", "--yes") == {"deleted": True, "name": "nightly", "instances": 2}
    run.fails("workflows", "describe", "nightly", code=13003)


def test_bad_input_is_refused_with_its_error_and_creates_nothing(run: Cli, client: conveyor.Conveyor) -> None:
    client.put_workflow("w")
    refused = run("workflows", "trigger", "w", "{not json")
    assert refused.exit_code == 1 and "PARAMS is not JSON" in refused.stderr
    run.fails("workflows", "trigger", "w", "--id", "-bad", code=13002)
    run.fails("workflows", "trigger", "w", "--traceparent", "00-nope", code=10207)
    run.fails("workflows", "trigger", "no-such", code=13003)
    run.ok("workflows", "trigger", "w", "--id", "taken")
    run.fails("workflows", "trigger", "w", "--id", "taken", code=13005)
    assert [s.id for s in client.workflow("w").list_instances().instances] == ["taken"]
    run.fails("workflows", "instances", "describe", "w", "missing", code=13004)
    dates = run("workflows", "instances", "list", "w", "--date-start", "yesterday")
    assert dates.exit_code == 1 and "is not an ISO-8601 date" in dates.stderr
    run.fails("workflows", "instances", "resume", "w", "taken", code=13007)
    usage = run("workflows", "instances", "restart", "w", "taken", "--from-step-count", "2")
    assert usage.exit_code == 2 and "need --from-step-name" in usage.stderr


def test_instance_commands_drive_a_run_and_describe_shows_its_timeline(run: Cli, client: conveyor.Conveyor) -> None:
    app = _app(client)
    with running(app):
        run.ok("workflows", "trigger", "pipeline", '{"name": "jquery"}', "--id", "one")
        settled(client.workflow("pipeline").get("one"), "waiting")
        timeline = run.ok("workflows", "instances", "describe", "pipeline", "latest").stdout
        assert "fetch-1" in timeline and "flaky-1" in timeline and "2 (1 failed)" in timeline
        assert "go-1" in timeline and "waitForEvent" in timeline and '{"name": "jquery"}' in timeline
        assert "first try fails" not in timeline, "a step that ended well shows no error"

        assert run.json("workflows", "instances", "pause", "pipeline", "one")["status"] == "paused"
        assert run.json("workflows", "instances", "resume", "pipeline", "one")["status"] in ("waiting", "running")
        sent = run.ok("workflows", "instances", "send-event", "pipeline", "one", "--type", "go", "--payload", "[1]")
        assert "Sent a 'go' event" in sent.stdout
        s = settled(client.workflow("pipeline").get("one"), "complete")
        assert s.output == {"got": {"name": "jquery"}, "again": {"tries": 2}, "event": [1]}

        described = run.json("workflows", "instances", "describe", "pipeline", "one")
        assert described["status"] == "complete" and described["success"] is True
        assert described["versionId"] == client.workflow("pipeline").record.version_id
        assert described["trigger"] == {"source": "api"} and len(described["trace_id"]) == 32
        assert [st["name"] for st in described["steps"]] == ["fetch-1", "flaky-1", "go-1"]
        flaky = described["steps"][1]
        assert [a["success"] for a in flaky["attempts"]] == [False, True]
        assert flaky["attempts"][0]["error"] == {"name": "RuntimeError", "message": "first try fails"}
        assert described["steps"][2]["output"]["payload"] == [1]
        no_output = run.ok("workflows", "instances", "describe", "pipeline", "one", "--no-step-output").stdout
        assert "output" not in no_output.split("Steps", 1)[1].splitlines()[2]

        run.ok("workflows", "instances", "restart", "pipeline", "one", "--from-step-name", "go", "--from-step-type",
               "waitForEvent")  # fmt: skip
        again = settled(client.workflow("pipeline").get("one"), "complete")  # the wait's event is given back
        assert again.output == s.output, "the steps before the restart point kept their results"
        run.fails("workflows", "instances", "terminate", "pipeline", "one", code=13007)
        run.ok("workflows", "trigger", "pipeline", '{"name": "lodash"}', "--id", "two")
        settled(client.workflow("pipeline").get("two"), "waiting")
        assert run.json("workflows", "instances", "terminate", "pipeline", "latest")["status"] == "terminated"

    listed = run.json("workflows", "instances", "list", "pipeline", "--status", "terminated")
    assert [i["id"] for i in listed] == ["two"]
    assert [i["id"] for i in run.json("workflows", "instances", "list", "pipeline", "--status", "complete")] == ["one"]


def test_instances_list_pages_newest_first_and_filters_dates(run: Cli, client: conveyor.Conveyor) -> None:
    wf = client.put_workflow("w")
    for n in range(5):
        wf.create(id=f"i{n}")
    assert [i["id"] for i in run.json("workflows", "instances", "list", "w", "--per-page", "2")] == ["i4", "i3"]
    second = run.json("workflows", "instances", "list", "w", "--per-page", "2", "--page", "2")
    assert [i["id"] for i in second] == ["i2", "i1"]
    oldest = run.json("workflows", "instances", "list", "w", "--per-page", "2", "--reverse")
    assert [i["id"] for i in oldest] == ["i0", "i1"]
    assert run.json("workflows", "instances", "list", "w", "--page", "9") == []
    assert run.json("workflows", "instances", "list", "w", "--date-end", "2000-01-01") == []
    assert len(run.json("workflows", "instances", "list", "w", "--date-start", "2000-01-01")) == 5
    assert "More on --page 2." in run.ok("workflows", "instances", "list", "w", "--per-page", "2").stdout


def test_the_commands_work_against_a_server(tmp_path: Path) -> None:
    with running_server(f"sqlite://{tmp_path / 'data'}") as server:
        secret = server.tokens.create("acc1")[0]
        remote = conveyor.connect(server.url, token=secret, account_id="acc1")
        try:
            remote.put_workflow("remote-wf")

            def run(*args: str) -> str:
                result = CliRunner().invoke(
                    cli, ["--url", server.url, "--token", secret, "--account", "acc1", *args], catch_exceptions=False
                )
                assert result.exit_code == 0, result.output
                return result.stdout

            assert "Created instance" in run("workflows", "trigger", "remote-wf", "--id", "r1")
            trace_id = remote.workflow("remote-wf").get("r1").status().trace_id
            assert "remote-wf/r1  queued" in run("trace", trace_id)
            assert "r1" in run("workflows", "instances", "list", "remote-wf")
            assert "queued" in run("workflows", "instances", "describe", "remote-wf", "r1")
            assert "remote-wf" in run("workflows", "list")
            assert "Terminated" in run("workflows", "instances", "terminate", "remote-wf", "r1")
            assert "Deleted workflow" in run("workflows", "delete", "remote-wf", "--yes")
            assert remote.list_workflows() == []
        finally:
            remote.close()
