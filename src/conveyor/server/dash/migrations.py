"""The dashboard's migrations (Super Slurper, :mod:`conveyor.slurper`): the account's jobs with their
live progress, one job's source, target, figures and logs, and its pause / resume / abort.

Everything goes through the slurper's public API (:class:`conveyor.slurper.Slurper`, what
``cv.slurper`` is on the server's own deployment), which returns a job's source and
target without their secrets. The jobs are account-wide, as over the REST API: a queue-scoped
token's session does not see them."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from conveyor.client.sync import Conveyor
from conveyor.errors import InvalidRequest
from conveyor.server.dash import views
from conveyor.server.dash.pages import POLL_SECONDS, Visit, action, client_of, dashboard, offset_of, page, render, tools
from conveyor.server.service import blocking
from conveyor.slurper import Job, JobNotFound, Slurper
from conveyor.slurper.model import LOG_TYPES

JOBS_PAGE = 50
LOGS_PAGE = 100
KEYS_SHOWN = 20  # a source given as a list of keys shows this many of them
DONE = {"pause": "paused", "resume": "resumed", "abort": "aborted"}
_JOB_ID = re.compile(r"[0-9A-Za-z-]{1,64}")


def _account(request: Request, visit: Visit) -> tuple[str, Conveyor]:
    account, client = client_of(request, visit)
    if not visit.session.whole_account:
        raise JobNotFound("this session's token is limited to some queues; migrations are account-wide")
    return account, client


def _job(request: Request, visit: Visit) -> tuple[str, Conveyor, Job]:
    account, client = _account(request, visit)
    job_id = request.path_params["job_id"]
    if not _JOB_ID.fullmatch(job_id):
        raise JobNotFound(f"no migration job {job_id!r} in account {account!r}")
    return account, client, Slurper(client).job(job_id)


def _rows(request: Request, visit: Visit) -> dict[str, Any]:
    account, client = _account(request, visit)
    offset = offset_of(request)
    rates = dashboard(request).rates
    now = client.engine.clock.now_ms()
    jobs = Slurper(client).list_jobs(limit=JOBS_PAGE + 1, offset=offset)
    rows = []
    for info in jobs[:JOBS_PAGE]:
        progress = Job(client, info.id).progress()  # listed just now: no second look-up
        rows.append((info, progress, rates.figures(progress, now)))
    return {
        "account": account,
        "visit": visit,
        "rows": rows,
        "offset": offset,
        "more": len(jobs) > JOBS_PAGE,
        "page_size": JOBS_PAGE,
        "poll": POLL_SECONDS,
        "size": views.size,
        "duration": views.duration,
    }


@page
async def jobs_page(request: Request, visit: Visit) -> Response:
    def build() -> dict[str, Any]:
        found = _rows(request, visit)
        return {**found, "tools": tools(request, found["account"], visit)}

    return render("migrations.html", **await blocking(build))


@page
async def jobs_rows(request: Request, visit: Visit) -> Response:
    return render("_migration_rows.html", **await blocking(_rows, request, visit))


def _live(request: Request, visit: Visit) -> dict[str, Any]:
    return _figures(request, *_job(request, visit))


def _figures(request: Request, account: str, client: Conveyor, job: Job) -> dict[str, Any]:
    progress = job.progress()
    figures = dashboard(request).rates.figures(progress, client.engine.clock.now_ms())
    return {
        "account": account,
        "progress": progress,
        "figures": figures,
        "size": views.size,
        "duration": views.duration,
    }


def _job_page(request: Request, visit: Visit) -> dict[str, Any]:
    account, client, job = _job(request, visit)
    live = _figures(request, account, client, job)
    log_type = request.query_params.get("type", "") or None
    if log_type is not None and log_type not in LOG_TYPES:
        raise InvalidRequest(f"type is {log_type!r}; it must be one of {', '.join(LOG_TYPES)}")
    offset = offset_of(request)
    logs = job.logs(LOGS_PAGE + 1, offset, log_type=log_type)
    info = job.info()
    keys = info.source.get("keys")
    return {
        **live,
        "visit": visit,
        "info": info,
        "source": _shown(info.source),
        "target": _shown(info.target),
        "keys": (keys[:KEYS_SHOWN], len(keys)) if keys else None,
        "logs": logs[:LOGS_PAGE],
        "more_logs": len(logs) > LOGS_PAGE,
        "log_type": log_type or "",
        "log_types": LOG_TYPES,
        "offset": offset,
        "page_size": LOGS_PAGE,
        "done": request.query_params.get("done", ""),
        "poll": POLL_SECONDS,
        "tools": tools(request, account, visit),
    }


def _shown(end: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """A source's or target's public fields as the page lists them (a key list apart), an endpoint
    without any ``user:password@`` a tenant may have written into its URL."""
    shown = []
    for name, value in end.items():
        if name == "keys" or value is None:
            continue
        if name == "endpoint":
            parts = urllib.parse.urlsplit(str(value))
            value = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
        shown.append((name, value))
    return shown


@page
async def job_page(request: Request, visit: Visit) -> Response:
    return render("migration.html", **await blocking(_job_page, request, visit))


@page
async def job_live(request: Request, visit: Visit) -> Response:
    return render("_migration_live.html", **await blocking(_live, request, visit))


def _change(request: Request, visit: Visit, form: dict[str, str], change: str) -> Response:
    """Pause, resume or abort a job, confirmed: ``confirm=yes`` for a pause or a resume (the
    confirmation form's button), the job's id typed for an abort."""
    account, _, job = _job(request, visit)
    wanted = job.id if change == "abort" else "yes"
    if form.get("confirm", "") != wanted:
        what = f"type the job's id, {job.id}," if change == "abort" else "confirm"
        raise InvalidRequest(f"{what} to {change} the job")
    getattr(job, change)()
    return RedirectResponse(f"/dash/a/{account}/migrations/{job.id}?done={DONE[change]}", status_code=303)


@action
async def pause(request: Request, visit: Visit, form: dict[str, str]) -> Response:
    return await blocking(_change, request, visit, form, "pause")


@action
async def resume(request: Request, visit: Visit, form: dict[str, str]) -> Response:
    return await blocking(_change, request, visit, form, "resume")


@action
async def abort(request: Request, visit: Visit, form: dict[str, str]) -> Response:
    return await blocking(_change, request, visit, form, "abort")
