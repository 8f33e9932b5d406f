"""The worker registry over HTTP, under ``/conveyor/v1/accounts/{account_id}/workers``.

- ``GET .../workers``: the live workers that run the account's queues, each with those runs only
  (any token of the account, read-only included; a queue-scoped token sees runs on its queues).
- ``PUT .../workers/{worker_id}``: a remote worker registers or heartbeats (a read-write token; every
  queue it names must be the account's and in the token's scope, else 404 as for any unknown queue).
- ``DELETE .../workers/{worker_id}``: a worker that stops (only the account that registered it).

Bodies are :mod:`conveyor.wire.engine`'s shapes (unknown fields refused); their values are checked here.
"""

from __future__ import annotations

import dataclasses

from starlette.requests import Request
from starlette.responses import Response

from conveyor import limits, wire
from conveyor.errors import InvalidRequest
from conveyor.model import WorkerEntry, WorkerRun
from conveyor.server.access import ACCOUNT_WRITE, TOKEN_QUEUES_READ, TOKEN_QUEUES_WRITE, declared
from conveyor.server.envelope import ok, read
from conveyor.server.service import Context, blocking, context

MAX_RUNS = 1000
MAX_TEXT = 255


def _short_text(key: str, value: str) -> str:
    if not value or len(value) > MAX_TEXT or not value.isprintable():
        raise InvalidRequest(f"{key} must be 1 to {MAX_TEXT} printable characters")
    return value


def _count(key: str, value: int | None, low: int, high: int) -> int | None:
    if value is not None and not low <= value <= high:
        raise InvalidRequest(f"{key} is {value!r}; it must be a whole number from {low} to {high}")
    return value


def _run(raw: wire.RunRequest) -> WorkerRun:
    if not limits.ID_PATTERN.match(raw.queue_id):
        raise InvalidRequest(f"queue_id {raw.queue_id!r} is malformed: expected 32 lowercase hex characters")
    return WorkerRun(
        queue_id=raw.queue_id,
        queue_name="",  # filled in from the catalog, never taken from the worker
        script_name=_short_text("script_name", raw.script_name),
        max_concurrency=_count("max_concurrency", raw.max_concurrency, 1, limits.MAX_CONCURRENCY),
        concurrency=_count("concurrency", raw.concurrency, 0, 100_000) or 0,
    )


def _entry(worker_id: str, body: wire.WorkerRequest) -> WorkerEntry:
    if not limits.ID_PATTERN.match(worker_id):
        raise InvalidRequest(f"worker id {worker_id!r} is malformed: expected 32 lowercase hex characters")
    if len(body.runs) > MAX_RUNS:
        raise InvalidRequest(f"a worker lists {len(body.runs)} runs; the limit is {MAX_RUNS}")
    return WorkerEntry(
        worker_id=worker_id,
        host=_short_text("host", body.host),
        pid=_count("pid", body.pid, 0, 2**31 - 1) or 0,
        started_ms=_count("started_ms", body.started_ms, 0, 2**53) or 0,
        heartbeat_ms=0,  # the server's clock says when it heard from the worker
        runs=tuple(_run(r) for r in body.runs),
    )


def _in_scope(ctx: Context, entry: WorkerEntry) -> WorkerEntry:
    """Every run's queue looked up as this caller sees it: 404 for one outside its account or scope."""
    for run in entry.runs:
        ctx.lookup_sync(run.queue_id)
    return entry


async def list_workers(request: Request) -> Response:
    ctx = context(request)
    entries = await blocking(ctx.client.engine.list_workers)
    visible = [
        dataclasses.replace(e, runs=tuple(r for r in e.runs if ctx.principal.sees(r.queue_name))) for e in entries
    ]
    return ok([wire.worker(e) for e in visible if e.runs])


async def record_worker(request: Request) -> Response:
    ctx = context(request)
    entry = _entry(request.path_params["worker_id"], await read(request, wire.WorkerRequest))
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
