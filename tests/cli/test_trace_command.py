"""``conveyor trace ID``: one run's tree from what the engine stored, a partial success visible."""

from __future__ import annotations

import conveyor
from conveyor import tracing
from tests.waiting import wait_for
from tests.workflows.support import running, settled

from .support import Cli

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACE_ID = TRACEPARENT[3:35]


def _partial_success(client: conveyor.Conveyor) -> None:
    """A parent that spawns a child, sends a message whose handler starts another instance, then
    fails for good at its third step."""
    app = conveyor.App(client, grace_period=5)
    jobs = client.create_queue("jobs")
    handled: list[str] = []

    @app.workflow("child")
    def child(event, step):
        return step.do("work", lambda: "done")

    @app.workflow("parent")
    def parent(event, step):
        step.do("spawn", lambda: client.workflow("child").create(id="kid").id)
        step.do("notify", lambda: jobs.send({"n": 1}).id)

        def broken() -> None:
            raise conveyor.NonRetryableError("bad tarball")

        step.do("publish", broken)
        return "never"

    @app.consumer("jobs", max_batch_size=1)
    def handle(batch: conveyor.MessageBatch) -> None:
        for _ in batch.messages:
            handled.append(client.workflow("child").create(id="from-message").id)

    with running(app):
        with tracing.use(TRACEPARENT):
            mom = client.workflow("parent").create(id="mom")
        settled(mom, "errored")
        wait_for(lambda: handled == ["from-message"], what="the handler to start an instance")
        settled(client.workflow("child").get("from-message"), "complete")
        settled(client.workflow("child").get("kid"), "complete")


def test_trace_prints_the_tree_of_a_partial_success(run: Cli, client: conveyor.Conveyor) -> None:
    _partial_success(client)
    text = run.ok("trace", TRACE_ID).stdout
    assert f"trace {TRACE_ID}  3 instances (2 complete, 1 errored)" in text
    lines = text.splitlines()
    order = [
        next(i for i, line in enumerate(lines) if part in line)
        for part in ("parent/mom", "step spawn-1", "child/kid", "step notify-1", "message jobs/", "child/from-message")
    ]
    assert order == sorted(order), text
    (publish,) = [line for line in lines if "step publish-1" in line]
    assert "errored" in publish and "NonRetryableError: bad tarball" in publish


def test_trace_json_is_the_tree_and_a_traceparent_names_the_same_trace(run: Cli, client: conveyor.Conveyor) -> None:
    _partial_success(client)
    tree = run.json("trace", TRACEPARENT)
    assert tree["trace_id"] == TRACE_ID and tree["truncated"] is False
    assert tree["summary"]["instances"] == {"complete": 2, "errored": 1}
    (mom,) = tree["instances"]
    assert (mom["workflow"], mom["id"], mom["status"]) == ("parent", "mom", "errored")
    spawn, notify, publish = mom["steps"]
    assert [c["id"] for c in spawn["children"]] == ["kid"]
    (message,) = notify["attempts"][0]["messages"]
    assert message["queue"] == "jobs" and [i["id"] for i in message["instances"]] == ["from-message"]
    assert publish["status"] == "errored" and publish["error"] == {
        "name": "NonRetryableError",
        "message": "bad tarball",
    }


def test_trace_of_an_instance_is_the_tree_of_its_trace(run: Cli, client: conveyor.Conveyor) -> None:
    _partial_success(client)
    assert run.json("trace", "child/kid") == run.json("trace", TRACE_ID)
    run.fails("trace", "child/nobody", code=13004)
    run.fails("trace", "nothing/kid", code=13003)


def test_trace_of_an_unknown_or_malformed_id(run: Cli) -> None:
    assert "no workflow instance has trace" in run.ok("trace", "ab" * 16).stdout
    result = run("trace", "nope")
    assert result.exit_code == 1 and "is not one: give 32 hex characters" in result.stderr
