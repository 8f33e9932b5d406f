"""Super Slurper's REST API, under ``/client/v4/accounts/{account_id}/slurper``, in the shapes of the
``cloudflare`` SDK's ``r2.super_slurper.*`` (:mod:`conveyor.wire.slurper`): jobs, their progress and
logs (SinglePage lists with ``limit`` and ``offset``), pause/resume/abort answering a bare string,
and the connectivity prechecks.

Every route reaches the whole account (a queue-scoped token may not call them); reads are open to
read-only tokens, writes are not. A tenant's S3 endpoints pass the operator's egress policy
(``--egress-allow``, ``$CONVEYOR_EGRESS_ALLOW``) before anything reaches them. The jobs run while a
worker of the account runs the pipeline's consumers (``conveyor.slurper.add_consumers``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import Response

from conveyor.egress import EgressPolicy
from conveyor.errors import ConveyorError, InvalidRequest
from conveyor.server.access import Access, Scope, declared
from conveyor.server.envelope import ok, read
from conveyor.server.service import Context, blocking, context
from conveyor.slurper.client import Slurper
from conveyor.slurper.errors import InvalidJob
from conveyor.wire import slurper as shapes

T = TypeVar("T")

SLURPER_READ = Access(Scope.ACCOUNT, read_only=True)
SLURPER_WRITE = Access(Scope.ACCOUNT)
BASE = "/client/v4/accounts/{account_id}/slurper"
JOBS = BASE + "/jobs"
JOB = JOBS + "/{job_id}"
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000


async def _call(request: Request, fn: Callable[[Slurper, Context], T]) -> T:
    ctx = context(request)
    return await blocking(fn, ctx.client.slurper, ctx)


def _whole(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
        raise InvalidRequest(f"{name} is {raw!r}; it must be a whole number from {low} to {high}")
    return int(raw)


def _paging(request: Request) -> tuple[int, int]:
    return _whole(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT), _whole(request, "offset", 0, 0, 10**12)


def _job_id(request: Request) -> str:
    return str(request.path_params["job_id"])


async def create_job(request: Request) -> Response:
    body = await read(request, shapes.SlurperJobRequest)
    policy = EgressPolicy.from_environment()
    job = await _call(
        request,
        lambda s, _: s.create_job(
            shapes.fields(body.source), shapes.fields(body.target), body.overwrite, egress=policy
        ),
    )
    return ok(shapes.SlurperJobCreated(job.id))


async def list_jobs(request: Request) -> Response:
    limit, offset = _paging(request)
    found = await _call(request, lambda s, _: s.list_jobs(limit, offset))
    return ok([shapes.job(info) for info in found])


async def get_job(request: Request) -> Response:
    job_id = _job_id(request)
    return ok(shapes.job(await _call(request, lambda s, _: s.job(job_id).info())))


async def job_progress(request: Request) -> Response:
    job_id = _job_id(request)
    return ok(shapes.progress(await _call(request, lambda s, _: s.job(job_id).progress())))


async def job_logs(request: Request) -> Response:
    job_id = _job_id(request)
    limit, offset = _paging(request)
    log_type = request.query_params.get("logType") or None  # beyond Cloudflare: one type only
    found = await _call(request, lambda s, _: s.job(job_id).logs(limit, offset, log_type=log_type))
    return ok([shapes.log(entry) for entry in found])


async def pause_job(request: Request) -> Response:
    job_id = _job_id(request)
    await _call(request, lambda s, _: s.job(job_id).pause())
    return ok(f"job {job_id} paused")


async def resume_job(request: Request) -> Response:
    job_id = _job_id(request)
    await _call(request, lambda s, _: s.job(job_id).resume())
    return ok(f"job {job_id} resumed")


async def abort_job(request: Request) -> Response:
    job_id = _job_id(request)
    await _call(request, lambda s, _: s.job(job_id).abort())
    return ok(f"job {job_id} aborted")


async def abort_all(request: Request) -> Response:
    count = await _call(request, lambda s, _: s.abort_all())
    return ok(f"{count} jobs aborted")


def _connectivity(check: Callable[[], None]) -> shapes.SlurperConnectivity:
    try:
        check()
    except InvalidJob:
        raise
    except ConveyorError as exc:  # unreachable, refused credentials, no such bucket, egress refused
        return shapes.SlurperConnectivity("error", exc.message)
    return shapes.SlurperConnectivity("success")


async def precheck_source(request: Request) -> Response:
    body = await read(request, shapes.SlurperSource)
    policy = EgressPolicy.from_environment()
    result = await _call(
        request, lambda s, _: _connectivity(lambda: s.precheck_source(shapes.fields(body), egress=policy))
    )
    return ok(result)


async def precheck_target(request: Request) -> Response:
    body = await read(request, shapes.SlurperTarget)
    policy = EgressPolicy.from_environment()
    result = await _call(
        request, lambda s, _: _connectivity(lambda: s.precheck_target(shapes.fields(body), egress=policy))
    )
    return ok(result)


ROUTES = [
    declared(JOBS, create_job, "POST", SLURPER_WRITE),
    declared(JOBS, list_jobs, "GET", SLURPER_READ),
    declared(JOBS + "/abortAll", abort_all, "PUT", SLURPER_WRITE),
    declared(JOB, get_job, "GET", SLURPER_READ),
    declared(JOB + "/progress", job_progress, "GET", SLURPER_READ),
    declared(JOB + "/logs", job_logs, "GET", SLURPER_READ),
    declared(JOB + "/pause", pause_job, "PUT", SLURPER_WRITE),
    declared(JOB + "/resume", resume_job, "PUT", SLURPER_WRITE),
    declared(JOB + "/abort", abort_job, "PUT", SLURPER_WRITE),
    declared(BASE + "/source/connectivity-precheck", precheck_source, "PUT", SLURPER_WRITE),
    declared(BASE + "/target/connectivity-precheck", precheck_target, "PUT", SLURPER_WRITE),
]
