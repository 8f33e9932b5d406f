"""The dashboard's workflow pages: the account's workflows, one workflow's instances (filtered by
status, creation dates and id, paged by the store's cursor), one instance (status, params, output,
error, its trace, the step timeline as a Gantt) with its actions (pause, resume, terminate,
restart, send an event), and a trace's tree (what ``conveyor trace ID`` shows).

Everything goes through the public workflows API (:class:`conveyor.workflows.Workflow`,
``Instance``, :func:`conveyor.workflows.traces.trace_tree`) over the server's one workflow store,
as the REST routes do, so the pages work on every engine and a request is checked as a Python
caller is. Workflows reach the whole account: a queue-scoped session gets a 404 here."""

from __future__ import annotations

import datetime
import json
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from conveyor.engine.accounts import check_account_id
from conveyor.errors import InvalidRequest, MalformedJSON, QueueNotFound
from conveyor.server.dash import timeline
from conveyor.server.dash.pages import Visit, action, dashboard, page, render, tools
from conveyor.server.service import blocking
from conveyor.workflows.client import COMPONENT, Instance, Workflow, check_instance_id, check_workflow_name
from conveyor.workflows.databases import open_served_store
from conveyor.workflows.errors import InstanceNotFound
from conveyor.workflows.execution import queue_name
from conveyor.workflows.model import FINISHED, STATUSES, InstanceSummary
from conveyor.workflows.records import list_workflows
from conveyor.workflows.store import WorkflowStore
from conveyor.workflows.traces import check_trace_id, trace_tree

PER_PAGE = 50
LIST_QUERY = {"status", "from", "to", "id", "cursor", "order"}
PAUSABLE = ("queued", "running", "waiting")
EVENT_TYPE_CHARS = 100


def _store(request: Request) -> WorkflowStore:
    return dashboard(request).service.store(COMPONENT, open_served_store)


def _account(request: Request, visit: Visit) -> str:
    account: str = check_account_id(request.path_params["account_id"])
    visit.session.check_account(account)
    if not visit.session.whole_account:
        raise QueueNotFound("workflows reach the whole account; this session's token reaches some queues only")
    return account


def _workflow(request: Request, visit: Visit) -> tuple[str, Workflow]:
    account = _account(request, visit)
    client = dashboard(request).service.client(account)
    return account, Workflow.open(client, check_workflow_name(request.path_params["workflow_name"]), _store(request))


def _instance(request: Request, visit: Visit) -> tuple[str, Workflow, Instance]:
    account, wf = _workflow(request, visit)
    return account, wf, wf.get(check_instance_id(request.path_params["instance_id"]))


def _workers_run(request: Request, account: str) -> set[str]:
    """The internal queues (``workflow~NAME``) some live worker runs."""
    engine = dashboard(request).service.client(account).engine
    return {run.queue_name for w in engine.list_workers() for run in w.runs}


# -- the account's workflows ---------------------------------------------------------------------
@page
async def workflows(request: Request, visit: Visit) -> Response:
    def shown() -> dict[str, Any]:
        account = _account(request, visit)
        client = dashboard(request).service.client(account)
        running = _workers_run(request, account)
        rows = []
        for wf in list_workflows(client, _store(request)):
            versions = wf.versions()
            rows.append(
                {
                    "name": wf.name,
                    "version": wf.record.version_id,
                    "versions": len(versions),
                    "script": wf.record.script_name,
                    "counts": wf.instance_counts(),
                    "no_worker": queue_name(wf.name) not in running,
                    "schedules": wf.record.settings.schedules,
                }
            )
        return {
            "account": account,
            "visit": visit,
            "tools": tools(request, account, visit),
            "rows": rows,
            "statuses": STATUSES,
        }

    return render("workflows.html", **await blocking(shown))


# -- one workflow's instances --------------------------------------------------------------------
def _date(raw: str, name: str, end_of_day: bool = False) -> datetime.datetime | None:
    if not raw:
        return None
    try:
        when = datetime.datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidRequest(f"{name} is {raw!r}; give a date (2026-12-04) or a date and time, UTC") from None
    if end_of_day and len(raw) == 10:  # a bare date: the whole of that day
        when += datetime.timedelta(days=1, milliseconds=-1)
    return when if when.tzinfo is not None else when.replace(tzinfo=datetime.UTC)


@page
async def instances(request: Request, visit: Visit) -> Response:
    def shown() -> dict[str, Any]:
        account, wf = _workflow(request, visit)
        query = request.query_params
        unknown = sorted(set(query) - LIST_QUERY)
        if unknown:
            raise InvalidRequest(
                f"unknown query parameter {unknown[0]!r}; this page takes {', '.join(sorted(LIST_QUERY))}"
            )
        status = query.get("status", "")
        if status and status not in STATUSES:
            raise InvalidRequest(f"status {status!r} is not one of {', '.join(STATUSES)}")
        start, end = _date(query.get("from", ""), "from"), _date(query.get("to", ""), "to", end_of_day=True)
        order = query.get("order", "desc")
        if order not in ("asc", "desc"):
            raise InvalidRequest(f"order is {order!r}; use asc (oldest first) or desc (newest first)")
        wanted = query.get("id", "").strip()
        cursor = query.get("cursor") or None
        if wanted:  # an id is unique in its workflow: the one instance, or none
            check_instance_id(wanted)
            try:
                found = [_summary_of(wf.get(wanted))]
            except InstanceNotFound:
                found = []
            summaries, next_cursor = found, None
        else:
            listed = wf.list_instances(
                status or None, date_start=start, date_end=end, cursor=cursor, per_page=PER_PAGE, direction=order
            )
            summaries, next_cursor = listed.instances, listed.cursor
        dates = {k: query.get(k, "") for k in ("from", "to") if query.get(k, "")}
        kept = {**({"status": status} if status else {}), **dates, "order": order}
        return {
            "account": account,
            "tools": tools(request, account, visit),
            "visit": visit,
            "workflow": wf.name,
            "record": wf.record,
            "counts": wf.instance_counts(date_start=start, date_end=end),
            "no_worker": queue_name(wf.name) not in _workers_run(request, account),
            "rows": [_row(s) for s in summaries],
            "statuses": STATUSES,
            "chosen": status,
            "from_": query.get("from", ""),
            "to": query.get("to", ""),
            "order": order,
            "id": wanted,
            "paged": cursor is not None,
            "next": None if next_cursor is None else urlencode({**kept, "cursor": next_cursor}),
            "first": urlencode(kept),
            "status_links": {s: urlencode({"status": s, **dates, "order": order}) for s in STATUSES},
            "per_page": PER_PAGE,
        }

    return render("workflow.html", **await blocking(shown))


def _when(when: datetime.datetime | None) -> str:
    return "" if when is None else when.strftime("%Y-%m-%d %H:%M:%S")


def _summary_of(instance: Instance) -> InstanceSummary:
    """The list's row of one instance (the id search's answer)."""
    status = instance.status()
    return InstanceSummary(status.id, status.status, status.queued, None, status.start, status.end, status.version_id)


def _row(summary: InstanceSummary) -> dict[str, str]:
    return {
        "id": summary.id,
        "status": summary.status,
        "created": _when(summary.created_on),
        "started": _when(summary.started_on),
        "ended": _when(summary.ended_on),
        "version": summary.version_id,
    }


# -- one instance ---------------------------------------------------------------------------------
@page
async def instance_page(request: Request, visit: Visit) -> Response:
    def shown() -> dict[str, Any]:
        account, wf, inst = _instance(request, visit)
        status = inst.status()
        now = dashboard(request).service.client(account).engine.clock.now_ms()
        return {
            "account": account,
            "tools": tools(request, account, visit),
            "visit": visit,
            "workflow": wf.name,
            "inst": status,
            "finished": status.status in FINISHED,
            "pausable": status.status in PAUSABLE,
            "paused": status.status == "paused",
            "params": timeline.show_json(status.params),
            "output": None if status.output is None else timeline.show_json(status.output),
            "error": status.error,
            "gantt": timeline.gantt(status, now),
            "restart_points": timeline.restart_points(status),
            "done": request.query_params.get("done", ""),
            "no_worker": queue_name(wf.name) not in _workers_run(request, account),
        }

    return render("instance.html", **await blocking(shown))


def _back(account: str, workflow: str, instance_id: str, done: str) -> Response:
    return RedirectResponse(f"/dash/a/{account}/workflows/{workflow}/i/{instance_id}?done={done}", status_code=303)


def _checked(form: dict[str, str], allowed: set[str], what: str) -> None:
    """Refuse a form with a field this action does not take, or without its confirmation box."""
    unknown = sorted(set(form) - allowed - {"csrf"})
    if unknown:
        raise InvalidRequest(f"unknown form field {unknown[0]!r}")
    if "confirm" in allowed and form.get("confirm", "") != "yes":
        raise InvalidRequest(f"tick the box to confirm: {what}")


async def _confirmed(request: Request, visit: Visit, form: dict[str, str], verb: str, done: str) -> Response:
    """An instance's ``verb`` (its method of that name) once the box is ticked; back to its page."""

    def run() -> Response:
        account, wf, inst = _instance(request, visit)
        _checked(form, {"confirm"}, f"{verb} this instance")
        getattr(inst, verb)()
        return _back(account, wf.name, inst.id, done)

    return await blocking(run)


@action
async def pause(request: Request, visit: Visit, form: dict[str, str]) -> Response:
    return await _confirmed(request, visit, form, "pause", "paused")


@action
async def resume(request: Request, visit: Visit, form: dict[str, str]) -> Response:
    return await _confirmed(request, visit, form, "resume", "resumed")


@action
async def terminate(request: Request, visit: Visit, form: dict[str, str]) -> Response:
    def run() -> Response:
        account, wf, inst = _instance(request, visit)
        _checked(form, {"typed"}, "")
        if form.get("typed", "") != inst.id:
            raise InvalidRequest(f"type the instance's id, {inst.id}, to confirm")
        inst.terminate()
        return _back(account, wf.name, inst.id, "terminated")

    return await blocking(run)


@action
async def restart(request: Request, visit: Visit, form: dict[str, str]) -> Response:
    def run() -> Response:
        account, wf, inst = _instance(request, visit)
        _checked(form, {"confirm", "from_step"}, "restart this instance")
        inst.restart(timeline.parse_restart_point(form.get("from_step", "")))
        return _back(account, wf.name, inst.id, "restarted")

    return await blocking(run)


@action
async def send_event(request: Request, visit: Visit, form: dict[str, str]) -> Response:
    def run() -> Response:
        account, wf, inst = _instance(request, visit)
        _checked(form, {"confirm", "type", "payload"}, "send this event")
        kind = form.get("type", "").strip()
        if not kind or len(kind) > EVENT_TYPE_CHARS:
            raise InvalidRequest(f"the event type is {kind!r}: give 1 to {EVENT_TYPE_CHARS} characters")
        text = form.get("payload", "").strip()
        try:
            payload = json.loads(text) if text else None
        except ValueError as exc:
            raise MalformedJSON(f"the event payload is not JSON: {exc}") from None
        inst.send_event(kind, payload)
        return _back(account, wf.name, inst.id, "event-sent")

    return await blocking(run)


# -- a trace ------------------------------------------------------------------------------------------
@page
async def trace(request: Request, visit: Visit) -> Response:
    def shown() -> dict[str, Any]:
        account = _account(request, visit)
        trace_id = check_trace_id(request.path_params["trace_id"])
        tree = trace_tree(dashboard(request).service.client(account), trace_id, _store(request))
        return {
            "account": account,
            "visit": visit,
            "tools": tools(request, account, visit),
            "tree": tree,
            "show_json": timeline.show_json,
        }

    return render("trace.html", **await blocking(shown))
