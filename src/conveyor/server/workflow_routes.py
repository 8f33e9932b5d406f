"""Cloudflare Workflows' REST API, under ``/client/v4/accounts/{account_id}/workflows``, so the
``cloudflare`` SDK's ``workflows.*`` and wrangler's ``workflows`` commands work against ``conveyor
serve`` (shapes in :mod:`conveyor.wire.workflows`).

Every handler goes through the Python API (:class:`conveyor.workflows.Workflow`, ``Instance``) with
the server's one workflow store, so a request is checked as a Python caller is, and refused with
the same codes (13001-13010). Lists page as Cloudflare's do: ``page``/``per_page`` (a page past the
end is an empty list, where the SDK's auto-paging stops), and instance lists also by
``result_info.cursor`` (wrangler's ``fetchCursorPage``). Every route reaches the whole account (a
queue-scoped token may not call them); reads are open to read-only tokens.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from conveyor import wire
from conveyor.errors import ConveyorError, InvalidRequest, MalformedJSON
from conveyor.server.access import Access, Scope, declared
from conveyor.server.envelope import ok, read_body
from conveyor.server.service import Context, blocking, context
from conveyor.wire import workflows as shapes
from conveyor.workflows.client import COMPONENT, Instance, Workflow, check_instance_id, check_workflow_name
from conveyor.workflows.databases import open_served_store
from conveyor.workflows.errors import InstanceNotFound, StepNotFound
from conveyor.workflows.execution import queue_name
from conveyor.workflows.model import MAX_BATCH, MAX_PAYLOAD_BYTES, STATUSES, WorkflowOverrides
from conveyor.workflows.records import check_overrides, list_workflows, put_overrides, retention_ms
from conveyor.workflows.store import WorkflowStore

T = TypeVar("T")

READ = Access(Scope.ACCOUNT, read_only=True)
WRITE = Access(Scope.ACCOUNT)
WORKFLOWS = "/client/v4/accounts/{account_id}/workflows"
WF = WORKFLOWS + "/{workflow_name}"
VERSION = WF + "/versions/{version_id}"
INSTANCES = WF + "/instances"
INSTANCE = INSTANCES + "/{instance_id}"
DEFAULT_PER_PAGE = 50
MAX_PER_PAGE = 100
MAX_LIST_PAGE = 10_000
# Statuses wrangler's terminate-all takes (the ones an instance can still be terminated from).
TERMINABLE = ("queued", "running", "paused", "waitingForPause", "waiting")
# A body of one instance's params or an event's payload (1 MiB of JSON, with room for the SDK's
# JSON-in-a-string escaping), and of a create batch of 100 of them.
MAX_CREATE_BYTES = 4 * MAX_PAYLOAD_BYTES
MAX_BATCH_BYTES = 128 * 1024 * 1024


# -- helpers -----------------------------------------------------------------------------------------
def _store(ctx: Context) -> WorkflowStore:
    return ctx.service.store(COMPONENT, open_served_store)


async def _run(request: Request, fn: Callable[[Context, WorkflowStore], T]) -> T:
    ctx = context(request)
    return await blocking(fn, ctx, _store(ctx))


def _workflow(ctx: Context, store: WorkflowStore, request: Request) -> Workflow:
    return Workflow.open(ctx.client, request.path_params["workflow_name"], store)


def _instance(ctx: Context, store: WorkflowStore, request: Request) -> Instance:
    return _workflow(ctx, store, request).get(request.path_params["instance_id"])


def _query(request: Request, allowed: set[str]) -> None:
    unknown = sorted(set(request.query_params) - allowed)
    if unknown:
        raise InvalidRequest(f"unknown query parameter {unknown[0]!r}; this route takes {', '.join(sorted(allowed))}")


def _whole(request: Request, name: str, default: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    # The SDK types page and per_page as floats: "2.0" is 2.
    text = raw[:-2] if raw.endswith(".0") else raw
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= high:
        raise InvalidRequest(f"{name} is {raw!r}; it must be a whole number from 1 to {high}")
    return int(text)


def _choice(request: Request, name: str, choices: tuple[str, ...], default: str) -> str:
    raw = request.query_params.get(name) or default
    if raw not in choices:
        raise InvalidRequest(f"{name} is {raw!r}; it must be one of {', '.join(choices)}")
    return raw


def _date(request: Request, name: str) -> datetime.datetime | None:
    raw = request.query_params.get(name)
    if not raw:
        return None
    try:
        when = datetime.datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidRequest(f"{name} is {raw!r}; give an ISO 8601 date or time (UTC)") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=datetime.UTC)


def _page_info(page: int, per_page: int, count: int, total: int, cursor: str | None = None) -> wire.ResultInfo:
    pages = math.ceil(total / per_page)
    return wire.ResultInfo(page, per_page, count, total, pages, cursor if cursor else msgspec.UNSET)


def _json_value(body: bytes, what: str) -> Any:
    """The JSON of a raw body (its size is checked once encoded again, as the Python API does)."""
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        raise MalformedJSON(f"{what} is not JSON") from None


# -- workflows -----------------------------------------------------------------------------------------
def _shown(wf: Workflow, has_worker: bool | None = None) -> shapes.Workflow:
    worked = wf.has_worker() if has_worker is None else has_worker
    return shapes.workflow(wf.record, wf.instance_counts(), worked)


async def list_workflows_route(request: Request) -> Response:
    _query(request, {"page", "per_page", "search"})
    page = _whole(request, "page", 1, 10**9)
    per_page = _whole(request, "per_page", DEFAULT_PER_PAGE, MAX_PER_PAGE)
    search = request.query_params.get("search", "")

    def listed(ctx: Context, store: WorkflowStore) -> Response:
        found = [wf for wf in list_workflows(ctx.client, store) if search.lower() in wf.name.lower()]
        chunk = found[(page - 1) * per_page : page * per_page]
        info = _page_info(page, per_page, len(chunk), len(found))
        # The live workers' runs read once for the page, not once per workflow.
        running = {run.queue_name for w in ctx.client.engine.list_workers() for run in w.runs}
        return ok([_shown(wf, queue_name(wf.name) in running) for wf in chunk], result_info=info)

    return await _run(request, listed)


async def get_workflow(request: Request) -> Response:
    _query(request, set())
    return ok(await _run(request, lambda ctx, store: _shown(_workflow(ctx, store, request))))


def overrides_of(body: shapes.WorkflowRequest) -> WorkflowOverrides:
    """The settings a PUT gives, checked (every bad one an error naming it)."""
    if body.jurisdiction not in (None, "us"):
        raise InvalidRequest(
            f"jurisdiction {body.jurisdiction!r} is not supported: a Conveyor deployment keeps its data where its "
            "storage is"
        )
    retention = body.default_retention or shapes.Retention()
    success = shapes.retention_value(retention.success_retention, "default_retention.success_retention")
    error = shapes.retention_value(retention.error_retention, "default_retention.error_retention")
    return check_overrides(
        WorkflowOverrides(
            class_name=body.class_name,
            script_name=body.script_name,
            schedules=None if body.schedules is None else tuple(s.cron for s in body.schedules),
            max_steps=None if body.limits is None else body.limits.steps,
            concurrency=None if body.concurrency is None else body.concurrency.limit,
            success_retention_ms=_retention_ms(success, "default_retention.success_retention"),
            error_retention_ms=_retention_ms(error, "default_retention.error_retention"),
        )
    )


def _retention_ms(value: int | str | None, what: str) -> int | None:
    if isinstance(value, int):
        return value
    return retention_ms(value, what)


async def put_workflow(request: Request) -> Response:
    name = check_workflow_name(request.path_params["workflow_name"])
    overrides = overrides_of(wire.decode(await read_body(request), shapes.WorkflowRequest))
    record = await _run(request, lambda ctx, store: put_overrides(ctx.client, name, overrides, store).record)
    return ok(shapes.workflow_updated(record))


async def delete_workflow(request: Request) -> Response:
    await _run(request, lambda ctx, store: _workflow(ctx, store, request).delete())
    return ok(shapes.Deleted())


# -- versions --------------------------------------------------------------------------------------------
async def list_versions(request: Request) -> Response:
    _query(request, {"page", "per_page"})
    page = _whole(request, "page", 1, 10**9)
    per_page = _whole(request, "per_page", DEFAULT_PER_PAGE, MAX_PER_PAGE)

    def listed(ctx: Context, store: WorkflowStore) -> Response:
        found = _workflow(ctx, store, request).versions()
        chunk = found[(page - 1) * per_page : page * per_page]
        info = _page_info(page, per_page, len(chunk), len(found))
        return ok([shapes.version(v, ctx.account_id) for v in chunk], result_info=info)

    return await _run(request, listed)


async def get_version(request: Request) -> Response:
    def got(ctx: Context, store: WorkflowStore) -> shapes.Version:
        v = _workflow(ctx, store, request).version(request.path_params["version_id"])
        return shapes.version(v, ctx.account_id)

    return ok(await _run(request, got))


async def get_version_graph(request: Request) -> Response:
    def got(ctx: Context, store: WorkflowStore) -> shapes.VersionGraph:
        v = _workflow(ctx, store, request).version(request.path_params["version_id"])
        return shapes.version_graph(v, ctx.account_id)

    return ok(await _run(request, got))


# -- instances ---------------------------------------------------------------------------------------------
def _item(body: shapes.CreateInstance, where: str) -> dict[str, Any]:
    if body.instance_retention is not None:
        raise InvalidRequest(
            f"{where}instance_retention is not supported: retention is the workflow's (its default_retention)"
        )
    params = body.params
    if isinstance(params, str):
        # The SDK's params is "JSON-encoded"; a string that is not JSON is that string.
        with contextlib.suppress(ValueError):
            params = json.loads(params)
    return {"params": params, "id": body.instance_id}


def _created(wf: Workflow, inst: Instance) -> shapes.InstanceCreated:
    return shapes.InstanceCreated(
        id=inst.id, status="queued", version_id=wf.record.version_id, workflow_id=shapes.workflow_id(wf.record)
    )


async def create_instance(request: Request) -> Response:
    body = wire.decode(await read_body(request, MAX_CREATE_BYTES), shapes.CreateInstance, required=False)
    item = _item(body, "")
    traceparent = request.headers.get("traceparent")  # the instance joins the caller's trace

    def create(ctx: Context, store: WorkflowStore) -> shapes.InstanceCreated:
        wf = _workflow(ctx, store, request)
        return _created(wf, wf.create(item["params"], item["id"], traceparent=traceparent))

    return ok(await _run(request, create))


async def create_batch(request: Request) -> Response:
    bodies = wire.decode(await read_body(request, MAX_BATCH_BYTES), list[shapes.CreateInstance])
    if not bodies or len(bodies) > MAX_BATCH:
        raise InvalidRequest(f"a batch holds 1 to {MAX_BATCH} instances, not {len(bodies)}")
    items = [_item(body, f"[{index}].") for index, body in enumerate(bodies)]
    traceparent = request.headers.get("traceparent")

    def create(ctx: Context, store: WorkflowStore) -> list[shapes.InstanceCreated]:
        wf = _workflow(ctx, store, request)
        result = wf.create_batch(items, traceparent=traceparent, all_or_none=True)
        return [_created(wf, inst) for inst in result.created]

    return ok(await _run(request, create))


async def list_instances(request: Request) -> Response:
    _query(request, {"cursor", "date_start", "date_end", "direction", "page", "per_page", "status"})
    per_page = _whole(request, "per_page", DEFAULT_PER_PAGE, MAX_PER_PAGE)
    page = _whole(request, "page", 1, MAX_LIST_PAGE)
    cursor = request.query_params.get("cursor") or None
    if cursor is not None and "page" in request.query_params and page != 1:
        raise InvalidRequest("give cursor or page, not both")
    direction = _choice(request, "direction", ("asc", "desc"), "desc")
    status = request.query_params.get("status") or None
    if status is not None and status not in (*STATUSES, "rollingBack"):
        raise InvalidRequest(f"status {status!r} is not one of {', '.join(STATUSES)}")
    start, end = _date(request, "date_start"), _date(request, "date_end")

    def listed(ctx: Context, store: WorkflowStore) -> Response:
        wf = _workflow(ctx, store, request)
        counts = wf.instance_counts(date_start=start, date_end=end)
        total = sum(counts.values()) if status is None else counts.get(status, 0)
        if status == "rollingBack":  # a status Conveyor's instances never have
            return ok([], result_info=_page_info(page, per_page, 0, 0))
        at, shown = cursor, []
        for number in range(1, page + 1):
            listing = wf.list_instances(
                status, date_start=start, date_end=end, cursor=at, per_page=per_page, direction=direction
            )
            shown, at = listing.instances, listing.cursor
            if at is None and number < page:
                shown = []  # a page past the end
                break
        scheduled = _scheduled(ctx, store, wf, [s.id for s in shown])
        wf_id = shapes.workflow_id(wf.record)
        result = [shapes.instance_listed(s, wf_id, s.id in scheduled) for s in shown]
        return ok(result, result_info=_page_info(page, per_page, len(result), total, at))

    return await _run(request, listed)


def _scheduled(ctx: Context, store: WorkflowStore, wf: Workflow, ids: list[str]) -> set[str]:
    """Which of the instances ``ids`` a cron tick started."""
    if not wf.record.settings.schedules:
        return set()
    rows = (store.get_instance(ctx.account_id, wf.name, i) for i in ids)
    return {row.id for row in rows if row is not None and row.scheduled_ms is not None}


async def get_instance(request: Request) -> Response:
    _query(request, {"order", "simple"})
    descending = _choice(request, "order", ("asc", "desc"), "asc") == "desc"
    simple = _choice(request, "simple", ("true", "false"), "false") == "true"

    def got(ctx: Context, store: WorkflowStore) -> shapes.InstanceDetail:
        wf = _workflow(ctx, store, request)
        inst = wf.get(request.path_params["instance_id"])
        status = inst.status()
        row = store.get_instance(ctx.account_id, wf.name, inst.id)
        scheduled = None if row is None else row.scheduled_ms
        crons = wf.record.settings.schedules
        cron = crons[0] if len(crons) == 1 else None
        return shapes.instance_detail(status, simple=simple, descending=descending, scheduled_ms=scheduled, cron=cron)

    return ok(await _run(request, got))


async def get_step(request: Request) -> Response:
    _query(request, {"name", "type", "attempt"})
    name = request.query_params.get("name")
    if not name:
        raise InvalidRequest("the query needs the step's name, with its counter (name-1)")
    kind = _choice(request, "type", ("step", "waitForEvent"), "step")
    attempt = _whole(request, "attempt", 0, 10**6) if request.query_params.get("attempt") else None

    def got(ctx: Context, store: WorkflowStore) -> shapes.StepDetail:
        inst = _instance(ctx, store, request)
        found = next((s for s in inst.status().steps if s.name == name and s.type == kind), None)
        if found is None:
            raise StepNotFound(f"instance {inst.id!r} has no {kind} step {name!r}")
        status = "running" if found.success is None else "complete" if found.success else "errored"
        error = shapes.workflow_error(found.error)
        if attempt is not None:
            if attempt > len(found.attempts):
                raise StepNotFound(f"step {name!r} has {len(found.attempts)} attempts, not {attempt}")
            tried = found.attempts[attempt - 1]
            status = "running" if tried.success is None else "complete" if tried.success else "errored"
            error = shapes.workflow_error(tried.error)
        output = found.output if status == "complete" else None
        event_type = found.config.get("type") if kind == "waitForEvent" else msgspec.UNSET
        return shapes.StepDetail(status=status, output=output, error=error, event_type=event_type)  # type: ignore[arg-type]

    return ok(await _run(request, got))


async def change_status(request: Request) -> Response:
    body = wire.decode(await read_body(request), shapes.StatusChange)
    if body.rollback and body.status != "terminate":
        raise InvalidRequest("rollback goes with status terminate")
    if body.rollback:
        raise InvalidRequest("rollback is not supported: Conveyor's steps have no rollback functions")
    if body.from_ is not None and body.status != "restart":
        raise InvalidRequest("from goes with status restart")
    given = body.from_
    from_step = None if given is None else {"name": given.name, "count": given.count, "type": given.type}

    def change(ctx: Context, store: WorkflowStore) -> shapes.StatusChanged:
        inst = _instance(ctx, store, request)
        if body.status == "pause":
            inst.pause()
        elif body.status == "resume":
            inst.resume()
        elif body.status == "terminate":
            inst.terminate()
        else:
            inst.restart(from_step)
        now = datetime.datetime.fromtimestamp(ctx.client.engine.clock.now_ms() / 1000, datetime.UTC)
        return shapes.StatusChanged(status=inst.status().status, timestamp=now)  # type: ignore[arg-type]

    return ok(await _run(request, change))


async def send_event(request: Request) -> Response:
    event_type = request.path_params["event_type"]
    payload = _json_value(await read_body(request, MAX_CREATE_BYTES), "the event payload")

    def send(ctx: Context, store: WorkflowStore) -> shapes.EventSent:
        inst = _instance(ctx, store, request)
        inst.send_event(event_type, payload)
        now = datetime.datetime.fromtimestamp(ctx.client.engine.clock.now_ms() / 1000, datetime.UTC)
        return shapes.EventSent(instance_id=inst.id, timestamp=now)

    return ok(await _run(request, send))


async def delete_instance(request: Request) -> Response:
    await _run(request, lambda ctx, store: _instance(ctx, store, request).delete())
    return ok(shapes.Deleted())


async def delete_batch(request: Request) -> Response:
    body = wire.decode(await read_body(request), shapes.BatchDelete)
    if not body.instances or len(body.instances) > MAX_BATCH:
        raise InvalidRequest(f"a batch delete names 1 to {MAX_BATCH} instances, not {len(body.instances)}")

    def delete(ctx: Context, store: WorkflowStore) -> shapes.BatchDeleted:
        wf = _workflow(ctx, store, request)
        deleted, errors = [], []
        for instance_id in body.instances:
            try:
                check_instance_id(instance_id)
                if not store.delete_instance(ctx.account_id, wf.name, instance_id):
                    raise InstanceNotFound(f"workflow {wf.name!r} has no instance {instance_id!r}")
                deleted.append(shapes.DeletedId(instance_id))
            except ConveyorError as exc:
                errors.append(shapes.DeleteError(instance_id, exc.code, exc.message))
        return shapes.BatchDeleted(deleted, errors)

    return ok(await _run(request, delete))


async def terminate_all(request: Request) -> Response:
    """Terminate every instance in ``status`` (all that can be terminated when left out); done
    before the answer, which is ``{"status": "ok"}`` as Cloudflare's once its terminator started."""
    _query(request, {"status"})
    status = request.query_params.get("status") or None
    if status is not None and status not in TERMINABLE:
        raise InvalidRequest(f"status {status!r} cannot be terminated; use one of {', '.join(TERMINABLE)}")

    def terminate(ctx: Context, store: WorkflowStore) -> shapes.TerminateStarted:
        wf = _workflow(ctx, store, request)
        for chosen in [status] if status else TERMINABLE:
            cursor = None
            while True:
                listing = wf.list_instances(chosen, cursor=cursor, per_page=MAX_PER_PAGE)
                for summary in listing.instances:
                    # One that finished or was deleted meanwhile has nothing left to terminate.
                    with contextlib.suppress(ConveyorError):
                        Instance(wf, summary.id).terminate()
                if listing.cursor is None:
                    break
                cursor = listing.cursor
        return shapes.TerminateStarted()

    return ok(await _run(request, terminate))


ROUTES = [
    declared(WORKFLOWS, list_workflows_route, "GET", READ),
    declared(WF, get_workflow, "GET", READ),
    declared(WF, put_workflow, "PUT", WRITE),
    declared(WF, delete_workflow, "DELETE", WRITE),
    declared(WF + "/versions", list_versions, "GET", READ),
    declared(VERSION, get_version, "GET", READ),
    declared(VERSION + "/graph", get_version_graph, "GET", READ),
    declared(INSTANCES, create_instance, "POST", WRITE),
    declared(INSTANCES, list_instances, "GET", READ),
    # wrangler's "latest" asks with a trailing slash.
    declared(INSTANCES + "/", list_instances, "GET", READ),
    declared(INSTANCES + "/batch", create_batch, "POST", WRITE),
    declared(INSTANCES + "/batch/delete", delete_batch, "POST", WRITE),
    declared(INSTANCES + "/terminate", terminate_all, "PUT", WRITE),
    declared(INSTANCE, get_instance, "GET", READ),
    declared(INSTANCE, delete_instance, "DELETE", WRITE),
    declared(INSTANCE + "/step", get_step, "GET", READ),
    declared(INSTANCE + "/status", change_status, "PATCH", WRITE),
    declared(INSTANCE + "/events/{event_type}", send_event, "POST", WRITE),
]
