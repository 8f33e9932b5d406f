"""The dashboard over plain HTTP: login and sessions, CSRF, read-only and cross-account refusals,
escaping of hostile bodies, the overview from the history, and the queue actions."""

from __future__ import annotations

import httpx

import conveyor
from conveyor.engine.history import HistoryRecorder
from conveyor.model import WorkerEntry, WorkerRun
from conveyor.server.dash import sessions
from conveyor.server.testing import RunningServer
from tests.dash.conftest import csrf_of, logged_in
from tests.engine.postgres.support import drop_schema, new_schema, schema_url

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def record(server: RunningServer) -> None:
    recorder = HistoryRecorder(server.engine)
    try:
        recorder()
    finally:
        recorder.close()


def test_pages_need_a_session_and_a_bad_token_logs_nobody_in(server: RunningServer) -> None:
    client = httpx.Client(base_url=server.url)
    assert client.get("/dash/a/acme").headers["location"] == "/dash/login"
    refused = client.post("/dash/login", data={"token": "cvt_not-a-token"})
    assert refused.status_code == 401 and "not valid" in refused.text
    assert sessions.COOKIE not in refused.cookies
    client.cookies.set(sessions.COOKIE, "eyJoIjoiYSJ9.forged.sig")
    assert client.get("/dash/a/acme").status_code == 303


def test_login_sets_a_strict_httponly_cookie_and_logout_ends_it(server: RunningServer) -> None:
    secret, _ = server.tokens.create("acme")
    client = httpx.Client(base_url=server.url)
    response = client.post("/dash/login", data={"token": secret})
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/dash" in cookie and "Max-Age=" in cookie
    assert secret not in cookie
    page = client.get("/dash/a/acme")
    assert page.status_code == 200 and secret not in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    client.post("/dash/logout", data={"csrf": csrf_of(page.text)})
    client.cookies.clear()  # the browser drops the cookie the logout expired
    assert client.get("/dash/a/acme").status_code == 303


def test_a_revoked_token_ends_its_sessions(server: RunningServer) -> None:
    secret, token = server.tokens.create("acme")
    client = logged_in(server, secret)
    assert client.get("/dash/a/acme").status_code == 200
    server.tokens.revoke(token.token_id)
    server.service.auth._cache.clear()
    assert client.get("/dash/a/acme").status_code == 303


def test_every_server_of_a_deployment_accepts_its_sessions(server: RunningServer) -> None:
    secret, _ = server.tokens.create("acme")
    client = logged_in(server, secret)
    other = sessions.SessionSigner(sessions.deployment_secret(server.engine.deployment()))
    assert other.load(client.cookies[sessions.COOKIE]) is not None


def test_writes_without_the_sessions_csrf_token_or_from_another_site_are_refused(server: RunningServer) -> None:
    secret, _ = server.tokens.create("acme")
    server.service.client("acme").create_queue("orders")
    client = logged_in(server, secret)
    csrf = csrf_of(client.get("/dash/a/acme/q/orders").text)
    assert client.post("/dash/a/acme/q/orders/pause", data={"other": "field"}).status_code == 403
    assert client.post("/dash/a/acme/q/orders/pause", data={"csrf": "0" * 64}).status_code == 403
    cross_site = client.post(
        "/dash/a/acme/q/orders/pause", data={"csrf": csrf}, headers={"origin": "https://evil.example"}
    )
    assert cross_site.status_code == 403
    other = logged_in(server, secret)  # another session's CSRF token is not this one's
    assert other.post("/dash/a/acme/q/orders/pause", data={"csrf": csrf}).status_code == 403
    assert not server.service.client("acme").queue("orders").info().settings.delivery_paused
    done = client.post("/dash/a/acme/q/orders/pause", data={"csrf": csrf}, headers={"origin": server.url})
    assert done.status_code == 303
    assert server.service.client("acme").queue("orders").info().settings.delivery_paused


def test_behind_a_tls_proxy_the_cookie_is_secure_and_https_posts_are_same_origin(server: RunningServer) -> None:
    """A TLS-terminating proxy on this machine says https in ``X-Forwarded-Proto``: the session
    cookie is ``Secure``, and the browser's ``Origin: https://...`` is this server's own."""
    secret, _ = server.tokens.create("acme")
    server.service.client("acme").create_queue("orders")
    host = server.url.removeprefix("http://")
    proxied = {"x-forwarded-proto": "https"}
    client = httpx.Client(base_url=server.url, headers=proxied)
    login = client.post("/dash/login", data={"token": secret})
    assert login.status_code == 303 and "Secure" in login.headers["set-cookie"]
    client.cookies.set(sessions.COOKIE, login.cookies[sessions.COOKIE])  # httpx sends a Secure cookie over https only
    csrf = csrf_of(client.get("/dash/a/acme/q/orders").text)
    plain = client.post(
        "/dash/a/acme/q/orders/pause",
        data={"csrf": csrf},
        headers={"x-forwarded-proto": "http", "origin": f"https://{host}"},
    )
    assert plain.status_code == 403  # an https page posting to a plain-http server is another origin
    done = client.post("/dash/a/acme/q/orders/pause", data={"csrf": csrf}, headers={"origin": f"https://{host}"})
    assert done.status_code == 303
    assert server.service.client("acme").queue("orders").info().settings.delivery_paused


def test_a_read_only_token_sees_no_buttons_and_its_writes_are_refused(server: RunningServer) -> None:
    secret, _ = server.tokens.create("acme", read_only=True)
    server.service.client("acme").create_queue("orders").send("keep", content_type="text")
    client = logged_in(server, secret)
    page = client.get("/dash/a/acme/q/orders")
    assert page.status_code == 200
    assert "Purge" not in page.text and "Pause delivery" not in page.text
    csrf = csrf_of(page.text)  # the logout form's
    for action in ("pause", "purge"):
        refused = client.post(f"/dash/a/acme/q/orders/{action}", data={"csrf": csrf, "confirm": "orders"})
        assert refused.status_code == 403 and "read-only" in refused.text
    assert server.service.client("acme").queue("orders").metrics().backlog_count == 1
    assert client.post("/dash/logout", data={"csrf": csrf}).headers["location"] == "/dash/login"


def test_another_accounts_queues_never_appear(server: RunningServer) -> None:
    secret, _ = server.tokens.create("acme")
    server.service.client("acme").create_queue("mine")
    server.service.client("rival").create_queue("theirs")
    record(server)
    client = logged_in(server, secret)
    overview = client.get("/dash/a/acme")
    assert "mine" in overview.text and "theirs" not in overview.text
    assert client.get("/dash/a/rival").status_code == 404
    assert client.get("/dash/a/rival/q/theirs").status_code == 404
    assert client.get("/dash/a/rival/q/theirs/history").status_code == 404
    assert client.get("/dash/a/acme/q/theirs").status_code == 404


def test_a_queue_scoped_token_sees_its_queues_only(server: RunningServer) -> None:
    secret, _ = server.tokens.create("acme", queues=("open",))
    server.service.client("acme").create_queue("open")
    server.service.client("acme").create_queue("secret-plans")
    client = logged_in(server, secret)
    assert "secret-plans" not in client.get("/dash/a/acme").text
    assert client.get("/dash/a/acme/q/secret-plans").status_code == 404


def test_an_operator_sees_every_account_and_writes_nothing(server: RunningServer) -> None:
    secret, _ = server.tokens.create_operator()
    server.service.client("acme").create_queue("a-queue")
    server.service.client("rival").create_queue("b-queue")
    client = logged_in(server, secret)
    accounts = client.get("/dash", follow_redirects=True)
    assert "acme" in accounts.text and "rival" in accounts.text
    page = client.get("/dash/a/rival/q/b-queue")
    assert page.status_code == 200 and "Purge" not in page.text
    refused = client.post("/dash/a/rival/q/b-queue/pause", data={"csrf": csrf_of(page.text)})
    assert refused.status_code == 403


def test_hostile_bodies_render_as_text(server: RunningServer) -> None:
    secret, _ = server.tokens.create("acme")
    q = server.service.client("acme").create_queue("inbox")
    q.send(HOSTILE, content_type="text")
    q.send({"html": HOSTILE}, content_type="json")
    q.send(b"\x00\xff<script>", content_type="bytes")
    q.send("x" * 5000, content_type="text")
    page = logged_in(server, secret).get("/dash/a/acme/q/inbox").text
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page
    assert "00 ff 3c 73 63 72 69 70 74 3e" in page  # bytes as hex
    assert "<details>" in page  # the long body folded


def test_overview_shows_figures_sparklines_filter_and_no_worker(server: RunningServer) -> None:
    secret, _ = server.tokens.create("acme")
    cv = server.service.client("acme")
    busy = cv.create_queue("busy")
    cv.create_queue("idle")
    busy.add_consumer("worker", script_name="app.handlers:handle")
    record(server)
    busy.send_batch([{"body": n} for n in range(7)])
    record(server)
    client = logged_in(server, secret)
    rows = client.get("/dash/a/acme/rows", params={"sort": "backlog", "desc": "1"}).text
    assert rows.index("busy") < rows.index("idle")
    assert '<td class="num backlog">7</td>' in rows
    assert "<polyline" in rows and "no worker" in rows
    filtered = client.get("/dash/a/acme/rows", params={"q": "idl"}).text
    assert "idle" in filtered and "busy" not in filtered
    history = client.get("/dash/a/acme/q/busy/history").json()["history"]
    assert [row["backlog"] for row in history] == [0, 7]


def test_overview_lists_the_workers_of_the_accounts_queues(server: RunningServer) -> None:
    secret, _ = server.tokens.create("acme")
    cv = server.service.client("acme")
    served = cv.create_queue("served")
    served.add_consumer("worker", script_name="app.handlers:handle")
    cv.engine.record_worker(
        WorkerEntry("w-acme", "host-a", 4242, 0, 0, (WorkerRun(served.id, "served", "app.handlers:handle", 8, 3),))
    )
    rival = server.service.client("rival").create_queue("elsewhere")
    server.service.client("rival").engine.record_worker(
        WorkerEntry("w-rival", "host-r", 99, 0, 0, (WorkerRun(rival.id, "elsewhere", "rival:run", None, 1),))
    )
    record(server)
    page = logged_in(server, secret).get("/dash/a/acme").text
    assert "host-a" in page and "served · app.handlers:handle · 3/8" in page
    assert "host-r" not in page and "rival:run" not in page
    assert "no worker" not in page


def test_purge_needs_the_typed_name(server: RunningServer) -> None:
    secret, _ = server.tokens.create("acme")
    q = server.service.client("acme").create_queue("doomed")
    q.send_batch([{"body": n} for n in range(3)])
    client = logged_in(server, secret)
    csrf = csrf_of(client.get("/dash/a/acme/q/doomed").text)
    wrong = client.post("/dash/a/acme/q/doomed/purge", data={"csrf": csrf, "confirm": "doom"})
    assert wrong.status_code == 400 and "type the queue" in wrong.text
    assert q.metrics().backlog_count == 3
    done = client.post("/dash/a/acme/q/doomed/purge", data={"csrf": csrf, "confirm": "doomed"})
    assert done.headers["location"].endswith("done=purged-3")
    assert q.metrics().backlog_count == 0


def test_redrive_sends_a_dead_letter_queues_messages_back_to_its_source(server: RunningServer) -> None:
    secret, _ = server.tokens.create("acme")
    cv = server.service.client("acme")
    work = cv.create_queue("work")
    dlq = cv.create_queue("work-dlq")
    work.add_pull_consumer(max_retries=0, dead_letter_queue="work-dlq")
    work.send_batch([{"body": n} for n in range(4)])
    work.ack(retries=[m.lease_id for m in work.pull(batch_size=4)])
    assert dlq.metrics().backlog_count == 4
    client = logged_in(server, secret)
    page = client.get("/dash/a/acme/q/work-dlq").text
    assert 'option value="work"' in page
    csrf = csrf_of(page)
    elsewhere = client.post("/dash/a/acme/q/work-dlq/redrive", data={"csrf": csrf, "confirm": "work-dlq", "to": "x"})
    assert elsewhere.status_code == 400
    done = client.post("/dash/a/acme/q/work-dlq/redrive", data={"csrf": csrf, "confirm": "work-dlq", "to": "work"})
    assert done.headers["location"].endswith("done=redriven-4")
    assert dlq.metrics().backlog_count == 0 and work.metrics().backlog_count == 4


def test_static_files_are_the_packaged_ones_only(server: RunningServer) -> None:
    client = httpx.Client(base_url=server.url)
    assert client.get("/dash/static/vendor/htmx.min.js").status_code == 200
    assert client.get("/dash/static/vendor/uPlot.LICENSE").status_code == 200
    assert client.get("/dash/static/../sessions.py").status_code == 404
    assert client.get("/dash/static/vendor/VERSIONS.json").status_code == 404


def test_postgres_deployments_keep_one_session_key() -> None:
    schema = new_schema()
    try:
        client = conveyor.connect(schema_url(schema))  # applies the migrations
        try:
            deployment = client.engine.deployment()
            first, second = sessions.deployment_secret(deployment), sessions.deployment_secret(deployment)
            assert first == second and len(first) >= 48
        finally:
            client.close()
    finally:
        drop_schema(schema)
