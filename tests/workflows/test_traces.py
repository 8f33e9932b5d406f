"""One trace across queue → workflow → step (on SQLite, PostgreSQL and over HTTP): an instance's
trace comes from its creator, messages sent from a step carry it to their consumers, instances
created by a step or by a handler of a traced message join it and record their origin, every log
line of a run names it, and the store finds a trace's instances."""

from __future__ import annotations

import json
import logging
import threading

import pytest

import conveyor
from conveyor import tracing
from conveyor.workflows.client import workflow_store
from tests.waiting import wait_for
from tests.workflows.support import running, settled

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def _register(app: conveyor.App) -> None:
    @app.workflow("noop")
    def noop(event, step):
        return step.do("only", lambda: 1)


def test_an_instance_takes_the_trace_given_or_current_or_a_new_one(cv, app) -> None:
    _register(app)
    with running(app):
        wf = cv.workflow("noop")
        given = wf.create(id="given", traceparent=TRACEPARENT)
        with tracing.use("00-" + "c" * 32 + "-" + "d" * 16 + "-01"):
            current = wf.create(id="current")
        fresh = wf.create(id="fresh")
        settled(fresh, "complete")
    assert given.status().trace_id == TRACE_ID
    assert current.status().trace_id == "c" * 32
    assert fresh.status().trace_id not in (TRACE_ID, "c" * 32) and len(fresh.status().trace_id) == 32
    store = workflow_store(cv)
    (row,) = store.instances_by_trace(cv.deployment.account, TRACE_ID, 10)
    assert (row.id, row.traceparent, row.origin) == ("given", TRACEPARENT, None)


@pytest.mark.parametrize(
    "bad",
    [
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # another version
        "00-" + "0" * 32 + "-00f067aa0ba902b7-01",  # the invalid trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01",  # the invalid span id
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # uppercase
        "00-4bf92f35-00f067aa0ba902b7-01",
    ],
)
def test_an_invalid_traceparent_is_refused_and_nothing_is_created(cv, app, bad) -> None:
    _register(app)
    with running(app):
        wf = cv.workflow("noop")
        with pytest.raises(conveyor.InvalidRequest, match="W3C traceparent"):
            wf.create(id="x", traceparent=bad)
        with pytest.raises(conveyor.InvalidRequest, match="W3C traceparent"), tracing.use(bad):
            pass
    assert wf.list_instances().instances == []


def test_messages_sent_from_a_step_carry_the_instance_trace_to_their_consumer(cv, app) -> None:
    out = cv.create_queue("out")
    out.add_pull_consumer()

    @app.workflow("sender")
    def sender(event, step):
        return step.do("send", lambda: out.send({"n": 1}).id)

    with running(app):
        inst = cv.workflow("sender").create(traceparent=TRACEPARENT)
        s = settled(inst, "complete")
    (pulled,) = out.pull()
    assert pulled.id == s.output
    assert pulled.traceparent is not None and pulled.traceparent[3:35] == TRACE_ID
    attempts = json.loads(workflow_store(cv).steps(cv.deployment.account, "sender", inst.id)[0].attempts)
    assert attempts[0]["messages"] == [{"queue": "out", "id": s.output}]


def test_a_child_instance_joins_the_trace_and_records_the_step_that_created_it(cv, app) -> None:
    @app.workflow("child")
    def child(event, step):
        return step.do("work", lambda: event.payload["n"] * 2)

    @app.workflow("parent")
    def parent(event, step):
        step.do("spawn", lambda: cv.workflow("child").create({"n": 21}, id="kid").id)
        return "spawned"

    with running(app):
        settled(cv.workflow("parent").create(id="mom", traceparent=TRACEPARENT), "complete")
        kid = settled(cv.workflow("child").get("kid"), "complete")
    assert kid.trace_id == TRACE_ID and kid.output == 42
    rows = workflow_store(cv).instances_by_trace(cv.deployment.account, TRACE_ID, 10)
    assert [(r.workflow, r.id) for r in rows] == [("parent", "mom"), ("child", "kid")]
    assert json.loads(rows[1].origin or "null") == {"workflow": "parent", "instance": "mom", "step": "step:spawn:1"}


def test_a_handler_of_a_traced_message_creates_instances_in_its_trace(cv, app) -> None:
    _register(app)
    jobs = cv.create_queue("jobs")
    made: list[str] = []

    @app.consumer("jobs", max_batch_size=1)
    def handle(batch: conveyor.MessageBatch) -> None:
        for m in batch.messages:
            made.append(cv.workflow("noop").create(id=f"from-{m.body['n']}").id)

    with running(app):
        with tracing.use(TRACEPARENT):
            sent = jobs.send({"n": 1}).id
        wait_for(lambda: made == ["from-1"], what="the handler to create an instance")
        s = settled(cv.workflow("noop").get("from-1"), "complete")
    assert s.trace_id == TRACE_ID
    (row,) = workflow_store(cv).instances_by_trace(cv.deployment.account, TRACE_ID, 10)
    assert json.loads(row.origin or "null") == {"queue": "jobs", "message": sent}


def test_every_log_line_of_a_run_names_its_trace(cv, app) -> None:
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    collect = Collect()
    collect.addFilter(tracing.TraceLogFilter())
    collect.setFormatter(logging.Formatter("%(trace_id)s %(message)s"))
    log = logging.getLogger("tests.workflows.traced")
    log.addHandler(collect)
    log.setLevel(logging.INFO)

    @app.workflow("logs")
    def logs(event, step):
        log.info("run")
        step.do("say", lambda: log.info("step"))
        return None

    try:
        with running(app):
            settled(cv.workflow("logs").create(traceparent=TRACEPARENT), "complete")
        log.info("outside")
    finally:
        log.removeHandler(collect)
    assert f"{TRACE_ID} step" in lines and f"{TRACE_ID} run" in lines
    assert "- outside" in lines


def test_a_long_attempt_shows_the_messages_it_sent_while_it_still_runs(cv, app) -> None:
    out = cv.create_queue("out")
    release = threading.Event()

    @app.workflow("slow")
    def slow(event, step):
        def work() -> int:
            out.send({"n": 1})
            release.wait(10)
            return 1

        return step.do("work", work)

    store = workflow_store(cv)

    def shown(instance_id: str) -> list[dict[str, str]] | None:
        steps = store.steps(cv.deployment.account, "slow", instance_id)
        return json.loads(steps[0].attempts)[-1].get("messages") if steps else None

    with running(app):
        inst = cv.workflow("slow").create()
        try:
            messages = wait_for(lambda: shown(inst.id), timeout=10, what="the running attempt to be shown")
        finally:
            release.set()
        settled(inst, "complete")
    assert [m["queue"] for m in messages] == ["out"]
    assert shown(inst.id) == messages, "the ended attempt keeps them"
