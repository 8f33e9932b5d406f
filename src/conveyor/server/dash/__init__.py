"""The dashboard: ``conveyor serve`` at ``/dash``, server-rendered pages to see and steer a deployment.

Structure (the whole dashboard; the first slice builds the parts marked *built*)::

    /dash/login            GET the form, POST a Conveyor token -> the session cookie     (built)
    /dash/logout           POST                                                           (built)
    /dash                  -> the session's account overview (an operator's: /dash/accounts)
    /dash/accounts         an operator's list of accounts (read-only, cross-account)     (built)
    /dash/a/{acc}          overview: every queue, figures from the history, sparklines,
                           sort, name filter, "no worker"; rows re-polled (htmx); the
                           live workers that run the account's queues                     (built)
    /dash/a/{acc}/q/{q}    a queue: live figures, charts of backlog and concurrency,
                           settings, consumer, peeked messages; pause / resume, purge,
                           a dead letter queue's redrive                                  (built)
    /dash/a/{acc}/workflows the account's workflows: versions, counts by status,
                           "no worker"                                                    (built)
    /dash/a/{acc}/workflows/{wf}  its instances: filters (status, dates, id), cursor
                           pages                                                          (built)
    /dash/a/{acc}/workflows/{wf}/i/{id}  an instance: params, output, error, trace, the
                           step timeline (a Gantt); pause / resume / terminate /
                           restart / send event                                           (built)
    /dash/a/{acc}/trace/{trace_id}  a trace's tree (``conveyor trace ID``)               (built)
    /dash/a/{acc}/migrations[/{job}]  migration jobs: live progress, rate and ETA;
                           a job's source, target and logs; pause / resume / abort        (built)
    /dash/a/{acc}/cdn[/p/{name}[/v/{version}]]  the CDN's packages, versions and their
                           publish state, a version's files and SRIs, the audit's counts  (built)
    /dash/a/{acc}/prober[/{fleet}[/r/{round}]]   fleets; a fleet's report, rounds and
                           targets; one round's jobs (read-only)                          (built)
    /dash/a/{acc}/buckets[/{b}[/o/{key}]]        buckets; objects by folder, a page at a
                           time; an object's metadata and its download (read-only)      (built)
    /dash/a/{acc}/kv[/{ns}[/k/{key}]]            namespaces; keys by prefix, a page at a
                           time; a value as text, JSON or hex (read-only)                (built)
    /dash/static/{file}    the vendored htmx and uPlot, the dashboard's CSS and JS       (built)

Pieces: :mod:`.sessions` (login, signed cookies, CSRF), :mod:`.pages` (handlers: ``page`` for
reads, ``action`` for writes), :mod:`.migrations` and :mod:`.cdn` (those sections' handlers),
:mod:`.views` (what a page shows, from the catalog and the queue history: a page never opens every
queue's shards), ``templates/`` (Jinja2, autoescaped; ``base.html`` holds the navigation a new
section adds itself to), ``static/`` (no build step: plain CSS and JS, htmx and uPlot vendored from
npm by ``scripts/vendor_dash.py``). A later section adds its handlers to a module of its own, its
routes to :data:`ROUTES` (each wrapped by ``page`` or ``action``, so sessions, CSRF and read-only
refusals come for free), a template extending ``base.html``, and a ``nav`` entry (shown when
:func:`.pages.tools` says the account has the tool).

Rules every page keeps: what a token may not see does not appear (its account's queues, or its
queues only); a read-only or operator session sees no buttons and its posts are refused (403);
every POST carries the session's CSRF token; nothing is marked safe in a template; no token or
key is ever rendered; nothing loads from another origin (the Content-Security-Policy says so).
"""

from __future__ import annotations

import mimetypes
from importlib import resources

from starlette.requests import Request
from starlette.responses import Response

from conveyor.server.access import DASHBOARD, DeclaredRoute, declared
from conveyor.server.dash import cdn, migrations, pages, prober_pages, storage_pages, workflow_pages

STATIC = resources.files("conveyor.server.dash").joinpath("static")
# Only the files the package ships are served, read once: no path from a request touches the disk.
_FILES: dict[str, tuple[bytes, str]] = {}
for _folder, _prefix in ((STATIC, ""), (STATIC.joinpath("vendor"), "vendor/")):
    for _entry in _folder.iterdir():
        if _entry.is_file() and not _entry.name.endswith(".json"):
            _type = mimetypes.guess_type(_entry.name)[0] or "text/plain"
            _charset = "; charset=utf-8" if _type.startswith(("text/", "application/javascript")) else ""
            _FILES[_prefix + _entry.name] = (_entry.read_bytes(), _type + _charset)


async def static(request: Request) -> Response:
    found = _FILES.get(request.path_params["path"])
    if found is None:
        return Response("not found", status_code=404, media_type="text/plain")
    body, media_type = found
    return Response(
        body,
        media_type=media_type,
        headers={"cache-control": "public, max-age=3600", "x-content-type-options": "nosniff"},
    )


A = "/dash/a/{account_id}"
Q = A + "/q/{queue_name}"
WF = A + "/workflows/{workflow_name}"
INST = WF + "/i/{instance_id}"
M = A + "/migrations"
J = M + "/{job_id}"
C = A + "/cdn"
P = C + "/p/{name}"
ROUTES: list[DeclaredRoute] = [
    declared("/dash", pages.home, "GET", DASHBOARD),
    declared("/dash/login", pages.login_form, "GET", DASHBOARD),
    declared("/dash/login", pages.login, "POST", DASHBOARD),
    declared("/dash/logout", pages.logout, "POST", DASHBOARD),
    declared("/dash/accounts", pages.accounts, "GET", DASHBOARD),
    declared("/dash/static/{path:path}", static, "GET", DASHBOARD),
    declared(A, pages.overview, "GET", DASHBOARD),
    declared(A + "/rows", pages.overview_rows, "GET", DASHBOARD),
    declared(Q, pages.queue_page, "GET", DASHBOARD),
    declared(Q + "/live", pages.queue_live, "GET", DASHBOARD),
    declared(Q + "/history", pages.queue_history, "GET", DASHBOARD),
    declared(Q + "/pause", pages.pause, "POST", DASHBOARD),
    declared(Q + "/resume", pages.resume, "POST", DASHBOARD),
    declared(Q + "/purge", pages.purge, "POST", DASHBOARD),
    declared(Q + "/redrive", pages.redrive, "POST", DASHBOARD),
    declared(A + "/workflows", workflow_pages.workflows, "GET", DASHBOARD),
    declared(WF, workflow_pages.instances, "GET", DASHBOARD),
    declared(INST, workflow_pages.instance_page, "GET", DASHBOARD),
    declared(INST + "/pause", workflow_pages.pause, "POST", DASHBOARD),
    declared(INST + "/resume", workflow_pages.resume, "POST", DASHBOARD),
    declared(INST + "/terminate", workflow_pages.terminate, "POST", DASHBOARD),
    declared(INST + "/restart", workflow_pages.restart, "POST", DASHBOARD),
    declared(INST + "/event", workflow_pages.send_event, "POST", DASHBOARD),
    declared(A + "/trace/{trace_id}", workflow_pages.trace, "GET", DASHBOARD),
    declared(M, migrations.jobs_page, "GET", DASHBOARD),
    declared(M + "/rows", migrations.jobs_rows, "GET", DASHBOARD),
    declared(J, migrations.job_page, "GET", DASHBOARD),
    declared(J + "/live", migrations.job_live, "GET", DASHBOARD),
    declared(J + "/pause", migrations.pause, "POST", DASHBOARD),
    declared(J + "/resume", migrations.resume, "POST", DASHBOARD),
    declared(J + "/abort", migrations.abort, "POST", DASHBOARD),
    declared(C, cdn.cdn_page, "GET", DASHBOARD),
    declared(C + "/rows", cdn.cdn_rows, "GET", DASHBOARD),
    declared(P, cdn.package_page, "GET", DASHBOARD),
    declared(P + "/v/{version}", cdn.version_page, "GET", DASHBOARD),
    declared(A + "/prober", prober_pages.fleets, "GET", DASHBOARD),
    declared(A + "/prober/{fleet}", prober_pages.fleet_page, "GET", DASHBOARD),
    declared(A + "/prober/{fleet}/r/{round_id}", prober_pages.round_page, "GET", DASHBOARD),
    declared(A + "/buckets", storage_pages.buckets, "GET", DASHBOARD),
    declared(A + "/buckets/{bucket}", storage_pages.bucket_page, "GET", DASHBOARD),
    declared(A + "/buckets/{bucket}/o/{key:path}", storage_pages.object_page, "GET", DASHBOARD),
    declared(A + "/buckets/{bucket}/download/{key:path}", storage_pages.download, "GET", DASHBOARD),
    declared(A + "/kv", storage_pages.namespaces, "GET", DASHBOARD),
    declared(A + "/kv/{namespace_id}", storage_pages.namespace_page, "GET", DASHBOARD),
    declared(A + "/kv/{namespace_id}/k/{key:path}", storage_pages.kv_value, "GET", DASHBOARD),
]
