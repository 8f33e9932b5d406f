"""The dashboard's workflow pages over plain HTTP: the account's workflows, a workflow's instances
(filters, the id search, cursor pages, bad input), one instance (its Gantt, params, output, error,
trace) and its actions, with sessions' scopes, CSRF, read-only refusals and escaping of hostile
params, outputs, errors and event payloads; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import conveyor
from conveyor.server.testing import RunningServer, running_server
from tests.dash.conftest import csrf_of, logged_in
from tests.engine.postgres.support import drop_schema, new_schema, schema_url
from tests.workflows.support import running, settled

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'
W = "/dash/a/acme/workflows"
NEXT = re.compile(r'href="\?([^"]+)" id="next-page"')


def next_link(page: str) -> str | None:
    found = NEXT.search(page)
    return None if found is None else found.group(1).replace("&amp;", "&")


def ids_of(page: str) -> list[str]:
    return re.findall(r'<tr data-instance="([^"]+)">', page)


@pytest.fixture
def cv(server: RunningServer) -> conveyor.Conveyor:
    """The account's embedded client on the server's engine (never closed: the server's)."""
    return server.service.client("acme")


def test_the_workflows_page_shows_versions_counts_and_no_worker(server: RunningServer, cv: conveyor.Conveyor) -> None:
    wf = cv.put_workflow("idle-flow", concurrency=2)
    wf.create_batch([{"id": f"i{n}"} for n in range(3)])
    wf.get("i0").terminate()
    server.service.client("rival").put_workflow("theirs")
    page = logged_in(server, server.tokens.create("acme")[0]).get(W)
    assert page.status_code == 200
    assert 'href="/dash/a/acme/workflows">Workflows</a>' in page.text  # the nav link
    row = page.text[page.text.index('data-workflow="idle-flow"') :].split("</tr>")[0]
    assert "no worker" in row and wf.record.version_id[:12] in row
    assert re.search(r'count-queued"><a href="[^"]+status=queued">2</a>', row)
    assert re.search(r'count-terminated"><a href="[^"]+status=terminated">1</a>', row)
    assert "theirs" not in page.text


def test_instances_filter_by_status_date_and_id_and_page_by_cursor(
    server: RunningServer, cv: conveyor.Conveyor
) -> None:
    wf = cv.put_workflow("many")
    for start in range(0, 120, 60):
        wf.create_batch([{"id": f"n{k:03d}"} for k in range(start, start + 60)])
    for k in (5, 50, 100):
        wf.get(f"n{k:03d}").pause()
    client = logged_in(server, server.tokens.create("acme")[0])
    seen: list[str] = []
    query: str | None = "order=asc"
    while query is not None:
        page = client.get(f"{W}/many?{query}")
        assert page.status_code == 200, page.text
        seen += ids_of(page.text)
        query = next_link(page.text)
    assert seen == [f"n{k:03d}" for k in range(120)]  # every instance once, in order, over 3 pages
    newest = ids_of(client.get(f"{W}/many").text)
    assert newest[0] == "n119" and len(newest) == 50
    paused = client.get(f"{W}/many", params={"status": "paused"}).text
    assert ids_of(paused) == ["n100", "n050", "n005"] and "paused <strong>3</strong>" in paused
    today = wf.get("n000").status().queued
    assert today is not None
    day = today.date().isoformat()
    assert len(ids_of(client.get(f"{W}/many", params={"from": day, "to": day}).text)) == 50
    assert ids_of(client.get(f"{W}/many", params={"to": "2000-01-01"}).text) == []
    assert ids_of(client.get(f"{W}/many", params={"id": "n007"}).text) == ["n007"]
    assert "No instance nope in this workflow" in client.get(f"{W}/many", params={"id": "nope"}).text


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"status": "sleeping"}, "status 'sleeping' is not one of"),
        ({"from": "yesterday"}, "from is 'yesterday'"),
        ({"cursor": "bm90LWEtY3Vyc29y"}, "is not one this server gave"),
        ({"order": "sideways"}, "order is 'sideways'"),
        ({"id": "<b>"}, "invalid instance id"),
        ({"page": "2"}, "unknown query parameter 'page'"),
    ],
)
def test_bad_filters_are_refused_with_a_clear_error(
    server: RunningServer, cv: conveyor.Conveyor, query: dict[str, str], says: str
) -> None:
    cv.put_workflow("flow")
    page = logged_in(server, server.tokens.create("acme")[0]).get(f"{W}/flow", params=query)
    assert page.status_code == 400 and says in page.text.replace("&#39;", "'")
    assert "<b>" not in page.text


def test_unknown_workflows_and_instances_are_404(server: RunningServer, cv: conveyor.Conveyor) -> None:
    cv.put_workflow("flow").create(id="here")
    client = logged_in(server, server.tokens.create("acme")[0])
    assert client.get(f"{W}/nothing").status_code == 404
    assert client.get(f"{W}/flow/i/absent").status_code == 404
    assert client.get(f"{W}/flow/i/here").status_code == 200
    assert client.get("/dash/a/acme/trace/not-a-trace").status_code == 400


def hostile_app(cv: conveyor.Conveyor) -> conveyor.App:
    app = conveyor.App(cv)

    @app.workflow("hostile")
    def hostile(event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> Any:
        def fail() -> None:
            raise ValueError(HOSTILE)

        got = step.wait_for_event("wait", type="go", timeout=60)
        if event.payload.get("fail"):
            step.do("breaks", fail, retries=conveyor.Retries(limit=1, delay=0.1))
        return {"echo": event.payload, "event": got.payload}

    return app


def test_hostile_params_outputs_errors_and_event_payloads_render_as_text(server: RunningServer) -> None:
    cv = server.connect("acme")  # a worker over HTTP, as another host runs one
    try:
        with running(hostile_app(cv)):
            wf = cv.workflow("hostile")
            ok, bad = wf.create({"html": HOSTILE}, id="ok"), wf.create({"html": HOSTILE, "fail": True}, id="bad")
            client = logged_in(server, server.tokens.create("acme")[0])
            for inst in (ok, bad):
                settled(inst, "waiting", timeout=30)
                page = client.get(f"{W}/hostile/i/{inst.id}").text
                done = client.post(
                    f"{W}/hostile/i/{inst.id}/event",
                    data={"csrf": csrf_of(page), "type": "go", "payload": json.dumps({"x": HOSTILE}), "confirm": "yes"},
                )
                assert done.status_code == 303, done.text
            settled(ok, "complete", timeout=30)
            settled(bad, "errored", timeout=30)
            trace_id = ok.status().trace_id
        for inst in ("ok", "bad"):
            page = client.get(f"{W}/hostile/i/{inst}").text
            assert "<script>alert" not in page and "<img src=x" not in page
            assert "&lt;script&gt;alert(" in page
        assert 'class="bar failed"' in client.get(f"{W}/hostile/i/bad").text
        assert "Attempt 2: <strong>ValueError</strong>: &lt;script&gt;" in client.get(f"{W}/hostile/i/bad").text
        trace = client.get(f"/dash/a/acme/trace/{trace_id}").text
        assert "hostile/ok" in trace and "<script>alert" not in trace
    finally:
        cv.close()


def test_actions_need_their_confirmation_and_refuse_bad_input(server: RunningServer, cv: conveyor.Conveyor) -> None:
    inst = cv.put_workflow("flow").create(id="target")
    client = logged_in(server, server.tokens.create("acme")[0])
    page = client.get(f"{W}/flow/i/target").text
    assert 'id="pause"' in page and 'id="terminate"' in page and 'id="send-event"' in page
    csrf = csrf_of(page)
    base = f"{W}/flow/i/target"

    def post(action: str, **form: str) -> httpx.Response:
        return client.post(f"{base}/{action}", data={"csrf": csrf, **form})

    assert post("pause").status_code == 400 and "tick the box" in post("pause").text
    assert post("pause", confirm="yes", extra="1").status_code == 400
    wrong = post("terminate", typed="targ")
    assert wrong.status_code == 400 and "type the instance" in wrong.text
    bad_json = post("event", type="go", payload="{not json", confirm="yes")
    assert bad_json.status_code == 400 and "the event payload is not JSON" in bad_json.text
    assert post("event", type="", payload="1", confirm="yes").status_code == 400
    assert post("restart", from_step="do:x", confirm="yes").status_code == 400
    assert inst.status().status == "queued"

    assert post("pause", confirm="yes").headers["location"].endswith("done=paused")
    assert inst.status().status == "paused"
    assert "Yes, resume" in client.get(base).text
    assert post("resume", confirm="yes").headers["location"].endswith("done=resumed")
    assert inst.status().status == "queued"
    assert post("event", type="go", payload='{"n": 1}', confirm="yes").status_code == 303
    assert post("terminate", typed="target").headers["location"].endswith("done=terminated")
    assert inst.status().status == "terminated"
    again = post("terminate", typed="target")
    assert again.status_code == 409  # InvalidInstanceState: it has finished
    assert post("restart", confirm="yes").headers["location"].endswith("done=restarted")
    assert inst.status().status == "queued"


def test_writes_need_the_csrf_token_a_same_site_post_and_a_writing_token(
    server: RunningServer, cv: conveyor.Conveyor
) -> None:
    inst = cv.put_workflow("flow").create(id="target")
    base = f"{W}/flow/i/target"
    client = logged_in(server, server.tokens.create("acme")[0])
    csrf = csrf_of(client.get(base).text)
    assert client.post(f"{base}/pause", data={"confirm": "yes"}).status_code == 403
    assert client.post(f"{base}/pause", data={"confirm": "yes", "csrf": "0" * 64}).status_code == 403
    cross = client.post(
        f"{base}/pause", data={"confirm": "yes", "csrf": csrf}, headers={"origin": "https://evil.example"}
    )
    assert cross.status_code == 403

    reader = logged_in(server, server.tokens.create("acme", read_only=True)[0])
    page = reader.get(base).text
    assert "read-only" in page and 'id="pause"' not in page and 'id="terminate"' not in page and "<textarea" not in page
    reader_csrf = csrf_of(page)  # the logout form's
    for action, form in (
        ("pause", {"confirm": "yes"}),
        ("terminate", {"typed": "target"}),
        ("event", {"type": "go", "confirm": "yes"}),
    ):
        refused = reader.post(f"{base}/{action}", data={"csrf": reader_csrf, **form})
        assert refused.status_code == 403 and "read-only" in refused.text
    assert inst.status().status == "queued"


def test_other_accounts_and_queue_scoped_tokens_see_no_workflows(server: RunningServer, cv: conveyor.Conveyor) -> None:
    server.service.client("rival").put_workflow("theirs").create(id="secret")
    cv.put_workflow("mine").create(id="own")
    trace_id = server.service.client("rival").workflow("theirs").get("secret").status().trace_id
    client = logged_in(server, server.tokens.create("acme")[0])
    for path in (
        "/dash/a/rival/workflows",
        "/dash/a/rival/workflows/theirs",
        "/dash/a/rival/workflows/theirs/i/secret",
    ):
        assert client.get(path).status_code == 404
    assert client.get(f"{W}/theirs").status_code == 404
    assert "No workflow instance has this trace" in client.get(f"/dash/a/acme/trace/{trace_id}").text
    csrf = csrf_of(client.get(W).text)
    assert (
        client.post(
            "/dash/a/rival/workflows/theirs/i/secret/terminate", data={"csrf": csrf, "typed": "secret"}
        ).status_code
        == 404
    )
    assert server.service.client("rival").workflow("theirs").get("secret").status().status == "queued"

    scoped = logged_in(server, server.tokens.create("acme", queues=("orders",))[0])
    assert scoped.get(W).status_code == 404 and scoped.get(f"{W}/mine/i/own").status_code == 404
    assert 'href="/dash/a/acme/workflows"' not in scoped.get("/dash/a/acme").text

    operator = logged_in(server, server.tokens.create_operator()[0])
    page = operator.get("/dash/a/rival/workflows/theirs/i/secret")
    assert page.status_code == 200 and 'id="terminate"' not in page.text


@pytest.fixture
def pg_server() -> Iterator[RunningServer]:
    schema = new_schema()
    try:
        with running_server(schema_url(schema)) as running_pg:
            yield running_pg
    finally:
        drop_schema(schema)


def test_the_workflow_pages_work_on_postgresql(pg_server: RunningServer) -> None:
    cv = pg_server.service.client("acme")
    wf = cv.put_workflow("pg-flow")
    wf.create_batch([{"id": f"p{n}", "params": {"n": n}} for n in range(60)])
    client = logged_in(pg_server, pg_server.tokens.create("acme")[0])
    assert "pg-flow" in client.get(W).text
    first = client.get(f"{W}/pg-flow")
    assert len(ids_of(first.text)) == 50
    nxt = next_link(first.text)
    assert nxt is not None and len(ids_of(client.get(f"{W}/pg-flow?{nxt}").text)) == 10
    page = client.get(f"{W}/pg-flow/i/p7").text
    assert "&#34;n&#34;: 7" in page
    done = client.post(f"{W}/pg-flow/i/p7/pause", data={"csrf": csrf_of(page), "confirm": "yes"})
    assert done.status_code == 303 and wf.get("p7").status().status == "paused"
