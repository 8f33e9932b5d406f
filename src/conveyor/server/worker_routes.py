"""The worker registry over HTTP, under ``/conveyor/v1/accounts/{account_id}/workers``.

- ``GET .../workers``: the live workers that run the account's queues, each with those runs only
  (any token of the account, read-only included; a queue-scoped token sees runs on its queues).
- ``PUT .../workers/{worker_id}``: a remote worker registers or heartbeats (a read-write token; every
  queue it names must be the account's and in the token's scope, else 404 as for any unknown queue).
- ``DELETE .../workers/{worker_id}``: a worker that stops (only the account that registered it).

Bodies are checked here, field by field, and unknown fields are refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from conveyor import limits
from conveyor.errors import InvalidRequest
from conveyor.model import WorkerEntry, WorkerRun
from conveyor.server.access import ACCOUNT_WRITE, TOKEN_QUEUES_READ, TOKEN_QUEUES_WRITE, declared
from conveyor.server.envelope import array, ok, read_json, text, whole
from conveyor.server.service import Context, blocking, context

_ENTRY_FIELDS = {"host", "pid", "started_ms", "runs"}
_RUN_FIELDS = {"queue_id", "script_name", "max_concurrency", "concurrency"}
MAX_RUNS = 1000
MAX_TEXT = 255


def _only(obj: dict[str, Any], allowed: set[str], what: str) -> dict[str, Any]:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise InvalidRequest(f"unknown field(s) in {what}: {', '.join(unknown)}; expected {', '.join(sorted(allowed))}")
    return obj


def _short_text(obj: dict[str, Any], key: str) -> str:
    value = text(obj, key, "")
    if not value or len(value) > MAX_TEXT or not value.isprintable():
        raise InvalidRequest(f"{key} must be 1 to {MAX_TEXT} printable characters")
    return str(value)


def _count(obj: dict[str, Any], key: str, low: int, high: int, *, optional: bool = False) -> int | None:
    value = whole(obj, key)
    if value is None and optional:
        return None
    if value is None or not low <= value <= high:
        raise InvalidRequest(f"{key} is {value!r}; it must be a whole number from {low} to {high}")
    return int(value)


def _run(raw: Any) -> WorkerRun:
    if not isinstance(raw, dict):
        raise InvalidRequest("each run must be {queue_id, script_name, max_concurrency, concurrency}")
    _only(raw, _RUN_FIELDS, "a run")
    queue_id = text(raw, "queue_id", "")
    if not limits.ID_PATTERN.match(queue_id):
        raise InvalidRequest(f"queue_id {queue_id!r} is malformed: expected 32 lowercase hex characters")
    return WorkerRun(
        queue_id=queue_id,
        queue_name="",  # filled in from the catalog, never taken from the worker
        script_name=_short_text(raw, "script_name"),
        max_concurrency=_count(raw, "max_concurrency", 1, limits.MAX_CONCURRENCY, optional=True),
        concurrency=_count(raw, "concurrency", 0, 100_000, optional=True) or 0,
    )


def _entry(worker_id: str, body: dict[str, Any]) -> WorkerEntry:
    if not limits.ID_PATTERN.match(worker_id):
        raise InvalidRequest(f"worker id {worker_id!r} is malformed: expected 32 lowercase hex characters")
    _only(body, _ENTRY_FIELDS, "a worker")
    runs = array(body, "runs")
    if len(runs) > MAX_RUNS:
        raise InvalidRequest(f"a worker lists {len(runs)} runs; the limit is {MAX_RUNS}")
    return WorkerEntry(
        worker_id=worker_id,
        host=_short_text(body, "host"),
        pid=_count(body, "pid", 0, 2**31 - 1) or 0,
        started_ms=_count(body, "started_ms", 0, 2**53) or 0,
        heartbeat_ms=0,  # the server's clock says when it heard from the worker
        runs=tuple(_run(r) for r in runs),
    )


def _in_scope(ctx: Context, entry: WorkerEntry) -> WorkerEntry:
    """Every run's queue looked up as this caller sees it: 404 for one outside its account or scope."""
    for run in entry.runs:
        ctx.lookup_sync(run.queue_id)
    return entry


def _shape(entry: WorkerEntry) -> dict[str, Any]:
    return {**dataclasses.asdict(entry), "runs": [dataclasses.asdict(run) for run in entry.runs]}


async def list_workers(request: Request) -> Response:
    ctx = context(request)
    entries = await blocking(ctx.client.engine.list_workers)
    visible = [
        dataclasses.replace(e, runs=tuple(r for r in e.runs if ctx.principal.sees(r.queue_name))) for e in entries
    ]
    return ok([_shape(e) for e in visible if e.runs])


async def record_worker(request: Request) -> Response:
    ctx = context(request)
    entry = _entry(request.path_params["worker_id"], await read_json(request))
    await blocking(lambda: ctx.client.engine.record_worker(_in_scope(ctx, entry)))
    return ok(None)


async def remove_worker(request: Request) -> Response:
    ctx = context(request)
    await blocking(ctx.client.engine.remove_worker, request.path_params["worker_id"])
    return ok(None)


PREFIX = "/conveyor/v1/accounts/{account_id}/workers"

ROUTES = [
    declared(PREFIX, list_workers, "GET", TOKEN_QUEUES_READ),
    declared(PREFIX + "/{worker_id}", record_worker, "PUT", TOKEN_QUEUES_WRITE),
    declared(PREFIX + "/{worker_id}", remove_worker, "DELETE", ACCOUNT_WRITE),
]
