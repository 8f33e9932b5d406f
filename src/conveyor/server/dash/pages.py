"""The dashboard's request handlers: login and logout, the overview, one queue's page and its
actions. Each page handler is wrapped by :func:`page`, which finds the session (or sends the
browser to the login form) and turns refusals into an HTML page; each write by :func:`action`,
which also checks the CSRF token and the origin, and refuses read-only sessions."""

from __future__ import annotations

import dataclasses
import functools
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from conveyor.cdn.errors import CdnNotInitialized
from conveyor.cdn.store import SQLITE_FILE, CdnStore
from conveyor.client.sync import Conveyor
from conveyor.client.validation import check_queue_name
from conveyor.engine.accounts import INTERNAL_MARK, SEPARATOR, check_account_id
from conveyor.engine.history import HistoryStore, history_rows
from conveyor.errors import ConveyorError, Forbidden, InvalidRequest, QueueNotFound, Unauthorized
from conveyor.model import QueueInfo
from conveyor.server.dash import sessions, views
from conveyor.server.service import Service, blocking
from conveyor.server.tokens import hash_secret
from conveyor.slurper.pipeline import LIST_QUEUE

OVERVIEW_MINUTES = 30  # the history the overview's sparklines draw
SPARK_BUCKET_MS = 60_000  # one sparkline point a minute, thinned by the database
OVERVIEW_ROWS = 50  # queues a page of the overview shows (and its poll refreshes)
CHART_MINUTES = 60  # and a queue's charts
PEEK_COUNT = 20
POLL_SECONDS = 3
FORM_BYTES = 16 * 1024
SECURITY_HEADERS = {
    # Nothing but this server's own files: no inline script, no frames, forms post only here.
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",  # no-referrer would make browsers send Origin: null
    "cache-control": "no-store",
}

templates = jinja2.Environment(
    loader=jinja2.PackageLoader("conveyor.server.dash", "templates"),
    autoescape=True,  # every page escapes everything it shows; nothing is marked safe
    undefined=jinja2.StrictUndefined,
)


@dataclass
class Dashboard:
    """The dashboard's state in one server: the session signer (made on first use from the
    deployment's key), and the server's history store."""

    service: Service
    _signer: sessions.SessionSigner | None = None
    rates: views.RateBook = field(default_factory=views.RateBook)

    def signer(self) -> sessions.SessionSigner:
        if self._signer is None:
            self._signer = sessions.SessionSigner(sessions.deployment_secret(self.service.engine.deployment()))
        return self._signer

    def history(self) -> HistoryStore:
        return self.service.history()

    def cdn(self) -> CdnStore | None:
        """The deployment's CDN store, or None on a SQLite deployment that never had a CDN (its
        ``cdn.db`` is not made by looking)."""
        deployment = self.service.engine.deployment()
        if deployment.kind == "sqlite" and not (Path(deployment.location) / SQLITE_FILE.name).exists():
            return None
        return self.service.store("cdn", lambda deployment, clock: CdnStore.open(deployment))


def dashboard(request: Request) -> Dashboard:
    service: Service = request.app.state.service
    dash = getattr(request.app.state, "dashboard", None)
    if dash is None:
        dash = request.app.state.dashboard = Dashboard(service)
    return dash


@dataclass(frozen=True, slots=True)
class Visit:
    """One request's session, with the cookie's session id (for the CSRF token)."""

    session: sessions.Session
    session_id: str


def _session(request: Request) -> Visit:
    dash = dashboard(request)
    raw = request.cookies.get(sessions.COOKIE)
    data = dash.signer().load(raw) if raw else None
    if data is None:
        raise sessions.no_session()
    auth = dash.service.auth
    if auth.no_auth:
        token = None
    else:
        assert auth.store is not None
        token = auth.store.table.find(data["h"])  # revoked: gone, and so is the session
        if token is None:
            raise sessions.no_session()
    account = token.account_id if token is not None and not token.operator else data["a"]
    return Visit(sessions.Session(token, account, dash.signer().csrf(data["s"])), data["s"])


def when(ms: int | None) -> str:
    """``2026-12-04 17:30:05`` (UTC) for a time in ms, ``–`` for none."""
    if ms is None:
        return "–"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000))


def render(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(templates.get_template(name).render(**context), status_code=status, headers=SECURITY_HEADERS)


def _error_page(exc: ConveyorError) -> HTMLResponse:
    return render("error.html", status=exc.status, message=exc.message, code=exc.code)


Handler = Callable[[Request], Awaitable[Response]]
PageHandler = Callable[[Request, Visit], Awaitable[Response]]


def page(handler: PageHandler) -> Handler:
    """A page: the session's, or the login form for a browser without one."""

    @functools.wraps(handler)
    async def run(request: Request) -> Response:
        try:
            visit = await blocking(_session, request)
            return await handler(request, visit)
        except Unauthorized:
            if request.headers.get("hx-request"):
                return Response(status_code=401, headers={"hx-redirect": "/dash/login"})
            return RedirectResponse("/dash/login", status_code=303)
        except ConveyorError as exc:
            return _error_page(exc)

    return run


async def _post(request: Request) -> tuple[Visit, dict[str, str]]:
    """A same-origin form post of a session, carrying that session's CSRF token."""
    sessions.check_same_origin(request)
    visit = await blocking(_session, request)
    form = await read_form(request)
    given = request.headers.get("x-csrf-token") or form.get("csrf", "")
    dashboard(request).signer().check_csrf(visit.session_id, given)
    return visit, form


def action(handler: Callable[[Request, Visit, dict[str, str]], Awaitable[Response]]) -> Handler:
    """A write: a session, a same-origin post with the session's CSRF token, a token that may write."""

    @functools.wraps(handler)
    async def run(request: Request) -> Response:
        try:
            visit, form = await _post(request)
            visit.session.check_write()
            return await handler(request, visit, form)
        except ConveyorError as exc:
            return _error_page(exc)

    return run


async def read_form(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body (every form of the dashboard), at most
    ``FORM_BYTES``; a field given twice, or any other body, is refused."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        raise InvalidRequest("the dashboard takes form posts (application/x-www-form-urlencoded) only")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_BYTES:
            raise InvalidRequest(f"a form of the dashboard is at most {FORM_BYTES} bytes")
    pairs = urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
    form = dict(pairs)
    if len(form) != len(pairs):
        raise InvalidRequest("a form field was given twice")
    return form


def offset_of(request: Request) -> int:
    """A paged list's ``offset`` query parameter (0 when absent)."""
    raw = request.query_params.get("offset", "0")
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 12:
        raise InvalidRequest(f"offset is {raw!r}; it must be a whole number, 0 or more")
    return int(raw)


# -- login ------------------------------------------------------------------------------------
async def login_form(request: Request) -> Response:
    no_auth = dashboard(request).service.auth.no_auth
    return render("login.html", no_auth=no_auth, error="")


async def login(request: Request) -> Response:
    dash = dashboard(request)
    try:
        sessions.check_same_origin(request)
    except Forbidden as exc:
        return _error_page(exc)
    try:
        form = await read_form(request)
    except InvalidRequest as exc:
        return _error_page(exc)
    secret = form.get("token", "").strip()
    auth = dash.service.auth
    if auth.no_auth:
        account = form.get("account", "").strip()
        try:
            check_account_id(account)
        except InvalidRequest as exc:
            return render("login.html", status=400, no_auth=True, error=exc.message)
        token_hash = ""
    else:
        token = await blocking(auth.store.verify, secret) if auth.store is not None and secret else None
        if token is None:
            return render("login.html", status=401, no_auth=False, error="that token is not valid")
        account, token_hash = token.account_id, hash_secret(secret)
    signer = await blocking(dash.signer)
    response = RedirectResponse("/dash", status_code=303)
    sessions.set_cookie(response, request, signer.cookie_value(token_hash, account), signer.max_age)
    return response


async def logout(request: Request) -> Response:
    """End the session (any session may, read-only ones too; the CSRF token still guards it)."""
    try:
        await _post(request)
    except ConveyorError as exc:
        return _error_page(exc)
    response = RedirectResponse("/dash/login", status_code=303)
    sessions.clear_cookie(response, request)
    return response


@page
async def home(request: Request, visit: Visit) -> Response:
    if visit.session.operator:
        return RedirectResponse("/dash/accounts", status_code=303)
    return RedirectResponse(f"/dash/a/{visit.session.account_id}", status_code=303)


@page
async def accounts(request: Request, visit: Visit) -> Response:
    if not visit.session.operator:
        raise QueueNotFound("only an operator's session lists the accounts")
    names = await blocking(dashboard(request).service.engine.queue_names)
    found = sorted({name.partition(SEPARATOR)[0] for name in names if SEPARATOR in name})
    return render("accounts.html", visit=visit, accounts=found)


# -- the account's tools ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Tools:
    """The account-wide tools an account has, for the navigation: migrations once it has made a
    job (the slurper's queues exist), the CDN once ``cdn init`` made it."""

    migrations: bool
    cdn: bool


def tools(request: Request, account: str, visit: Visit) -> Tools:
    if not visit.session.whole_account:
        return Tools(False, False)
    client = dashboard(request).service.client(account)
    # The catalog's queues named so (a range seek), not every queue of the account.
    migrations = LIST_QUEUE in client.engine.queue_names(LIST_QUEUE)
    store = dashboard(request).cdn()
    if store is None:
        return Tools(migrations, False)
    try:
        store.settings(account)
    except CdnNotInitialized:
        return Tools(migrations, False)
    return Tools(migrations, True)


# -- the overview -----------------------------------------------------------------------------
def client_of(request: Request, visit: Visit) -> tuple[str, Conveyor]:
    """The account of the request's path, if the session may see it, and its client."""
    account = request.path_params["account_id"]
    check_account_id(account)
    visit.session.check_account(account)
    return account, dashboard(request).service.client(account)


def account_client(request: Request, visit: Visit, what: str) -> tuple[str, Conveyor]:
    """The path's account and a client of it, for a page of an account-wide section (``what``:
    "buckets", ...): 404 for another account, 403 for a session whose token is limited to queues."""
    account, client = client_of(request, visit)
    visit.session.check_account_wide(what)
    return account, client


def _overview_rows(request: Request, visit: Visit) -> dict[str, Any]:
    """The overview's rows: the visible queues' names from the catalog (one statement), filtered by
    name, sorted, then one page of them, whose catalog entries are read (one or two statements).
    Sorted by a figure, every matched queue is ranked by that figure of its newest point, read from
    the newest-point table (one range read of the account's rows). Then the page's newest two points
    (one statement, the same table) and sparklines, a point a minute (one statement). No queue's
    storage is opened, and only the page's 50 queues are built into rows."""
    account, client = client_of(request, visit)
    engine = client.engine
    names = [n for n in engine.queue_names() if visit.session.sees(n)]
    history = dashboard(request).history()
    since = engine.clock.now_ms() - OVERVIEW_MINUTES * 60_000
    prefix = account + SEPARATOR
    wanted = request.query_params.get("q", "").strip().lower()
    matched = [n for n in names if wanted in n] if wanted else names
    sort = request.query_params.get("sort", "name")
    sort = sort if sort in views.SORTS else "name"
    descending = request.query_params.get("desc", "") == "1"
    pages = views.pager(len(matched), request.query_params.get("page", "1"), OVERVIEW_ROWS)
    if sort == "name":  # the page is known before any figure is read
        page_names = sorted(matched, reverse=descending)[pages.first : pages.last]
    else:  # every matched queue ranked by its figure in the newest-point table (one range read)
        figures = history.latest_figures(prefix, since, sort)
        ranked = views.rank_by_figure(matched, {n: figures.get(prefix + n, 0.0) for n in matched}, descending)
        page_names = ranked[pages.first : pages.last]
    newest = history.latest([prefix + n for n in page_names], since)
    infos = {q.queue_name: q for q in engine.queues_named(page_names)}
    shown_queues = [infos[n] for n in page_names if n in infos]  # one deleted meanwhile is left out
    workers = engine.list_workers()
    missing = views.unserved(shown_queues, workers)
    shown = [
        views.queue_row(q, newest.get(prefix + q.queue_name, []), q.queue_name in missing, ()) for q in shown_queues
    ]
    sparks = history.backlog_by_bucket([prefix + r.name for r in shown], since, SPARK_BUCKET_MS)
    shown = [dataclasses.replace(r, spark=views.sparkline(sparks.get(prefix + r.name, []))) for r in shown]
    return {
        "account": account,
        "rows": shown,
        "pager": pages,
        "matched": len(matched),
        "sort": sort,
        "desc": descending,
        "q": wanted,
        "total": len(names),
        "visit": visit,
        "poll": POLL_SECONDS,
        "sorts": views.SORTS,
        "workers": views.worker_rows(workers, visit.session.sees, client.engine.clock.now_ms()),
    }


@page
async def overview(request: Request, visit: Visit) -> Response:
    def build() -> dict[str, Any]:
        found = _overview_rows(request, visit)
        return {**found, "tools": tools(request, found["account"], visit)}

    return render("overview.html", **await blocking(build))


@page
async def overview_rows(request: Request, visit: Visit) -> Response:
    return render("_queue_rows.html", **await blocking(_overview_rows, request, visit))


# -- one queue --------------------------------------------------------------------------------
def _queue(request: Request, visit: Visit) -> tuple[str, Conveyor, QueueInfo]:
    account, client = client_of(request, visit)
    name = check_queue_name(request.path_params["queue_name"])
    if INTERNAL_MARK in name or not visit.session.sees(name):
        raise QueueNotFound(f"queue {name!r} does not exist")
    return account, client, client.queue(name).info()


def _queue_page(request: Request, visit: Visit) -> dict[str, Any]:
    account, client, info = _queue(request, visit)
    engine = client.engine
    sources = [s for s in engine.dead_letter_sources(info.queue_name) if visit.session.sees(s)]
    messages = engine.peek(info.queue_id, PEEK_COUNT)
    return {
        "account": account,
        "queue": info,
        "visit": visit,
        "sources": sources,
        "messages": [(m, views.show_body(m)) for m in messages],
        "no_worker": info.queue_name in views.unserved([info], engine.list_workers()),
        "done": request.query_params.get("done", ""),
        "poll": POLL_SECONDS,
        "tools": tools(request, account, visit),
        **_live(client, info),
    }


def _live(client: Conveyor, info: QueueInfo) -> dict[str, Any]:
    """This one queue's figures now (its own shards only)."""
    metrics, counters = client.engine.metrics(info.queue_id), client.engine.counters(info.queue_id)
    now = client.engine.clock.now_ms()
    oldest = metrics.oldest_message_timestamp_ms
    return {
        "metrics": metrics,
        "counters": counters,
        "oldest_age_s": max(0, now - oldest) / 1000 if oldest else 0.0,
        "now": time.strftime("%H:%M:%S", time.gmtime(now / 1000)),
    }


@page
async def queue_page(request: Request, visit: Visit) -> Response:
    return render("queue.html", **await blocking(_queue_page, request, visit))


@page
async def queue_live(request: Request, visit: Visit) -> Response:
    def figures() -> dict[str, Any]:
        account, client, info = _queue(request, visit)
        return {"account": account, "queue": info, **_live(client, info)}

    return render("_queue_live.html", **await blocking(figures))


@page
async def queue_history(request: Request, visit: Visit) -> Response:
    def rows() -> list[dict[str, Any]]:
        account, client, info = _queue(request, visit)
        since = client.engine.clock.now_ms() - CHART_MINUTES * 60_000
        return history_rows(dashboard(request).history().of_queue(account + SEPARATOR + info.queue_name, since))

    return JSONResponse({"history": await blocking(rows)}, headers=SECURITY_HEADERS)


def _back(account: str, name: str, done: str) -> Response:
    return RedirectResponse(f"/dash/a/{account}/q/{name}?done={done}", status_code=303)


def _confirmed(form: dict[str, str], name: str) -> None:
    if form.get("confirm", "") != name:
        raise InvalidRequest(f"type the queue's name, {name}, to confirm")


@action
async def pause(request: Request, visit: Visit, form: dict[str, str]) -> Response:
    def run() -> Response:
        account, client, info = _queue(request, visit)
        client.queue(info.queue_name).pause_delivery()
        dashboard(request).service.forget(account, info.queue_id)
        return _back(account, info.queue_name, "paused")

    return await blocking(run)


@action
async def resume(request: Request, visit: Visit, form: dict[str, str]) -> Response:
    def run() -> Response:
        account, client, info = _queue(request, visit)
        client.queue(info.queue_name).resume_delivery()
        dashboard(request).service.forget(account, info.queue_id)
        return _back(account, info.queue_name, "resumed")

    return await blocking(run)


@action
async def purge(request: Request, visit: Visit, form: dict[str, str]) -> Response:
    def run() -> Response:
        account, client, info = _queue(request, visit)
        _confirmed(form, info.queue_name)
        count = client.queue(info.queue_name).purge()
        return _back(account, info.queue_name, f"purged-{count}")

    return await blocking(run)


@action
async def redrive(request: Request, visit: Visit, form: dict[str, str]) -> Response:
    """Move the dead letter queue's messages back to a queue that dead-letters into it."""

    def run() -> Response:
        account, client, info = _queue(request, visit)
        _confirmed(form, info.queue_name)
        target = form.get("to", "")
        sources = client.engine.dead_letter_sources(info.queue_name)
        if target not in sources or not visit.session.sees(target):
            raise InvalidRequest(f"to: {target!r} is not a queue that dead-letters into {info.queue_name}")
        count = client.queue(info.queue_name).redrive(target)
        return _back(account, info.queue_name, f"redriven-{count}")

    return await blocking(run)
