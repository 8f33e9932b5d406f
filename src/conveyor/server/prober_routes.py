"""The prober's REST routes, under ``/client/v4/accounts/{account_id}/prober``: a fleet's targets
(list, add, remove), a round now (run by the fleet's worker, as a cron tick), a round's summary,
the fleet's report, and the account's fleets.

Every route reaches the whole account (a queue-scoped token may not call them); reads are open to
read-only tokens, writes are not. A target's address passes the operator's egress policy
(``--egress-allow``, ``$CONVEYOR_EGRESS_ALLOW``) before it is stored, so no tenant makes a worker
probe the operator's own network. Check names are looked up among those the fleet's worker
registered; nothing a request says is ever imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import Response

from conveyor.egress import EgressPolicy
from conveyor.errors import InvalidRequest
from conveyor.prober.fleet import Fleet, list_fleets
from conveyor.prober.model import check_fleet_name, parse_interval
from conveyor.prober.report import DEFAULT_MIN_GAP_MS
from conveyor.server.access import Access, Scope, declared
from conveyor.server.envelope import ok, read
from conveyor.server.service import blocking, context
from conveyor.wire import prober as shapes

T = TypeVar("T")

PROBER_READ = Access(Scope.ACCOUNT, read_only=True)
PROBER_WRITE = Access(Scope.ACCOUNT)
BASE = "/client/v4/accounts/{account_id}/prober/fleets"
FLEET = BASE + "/{fleet}"
MAX_TARGETS = 10_000


async def _call(request: Request, fn: Callable[[Fleet], T]) -> T:
    ctx = context(request)
    fleet = Fleet(ctx.client, check_fleet_name(request.path_params["fleet"]))
    return await blocking(fn, fleet)


async def list_all(request: Request) -> Response:
    ctx = context(request)
    return ok(await blocking(list_fleets, ctx.client))


async def list_targets(request: Request) -> Response:
    return ok(await _call(request, lambda f: f.targets()))


async def add_targets(request: Request) -> Response:
    body = await read(request, list[shapes.ProbeTargetRequest])
    if len(body) > MAX_TARGETS:
        raise InvalidRequest(f"{len(body)} targets at once; the limit is {MAX_TARGETS}")
    policy = EgressPolicy.from_environment()
    added, listed = await _call(request, lambda f: f.import_targets([t.fields() for t in body], egress=policy))
    return ok(shapes.ProbeTargetsAdded(added, listed))


async def remove_target(request: Request) -> Response:
    key = request.query_params.get("key", "")
    if not key:
        raise InvalidRequest("give the target's id or address as ?key=")
    return ok(shapes.ProbeTargetsRemoved(await _call(request, lambda f: f.remove(key))))


async def start_round(request: Request) -> Response:
    return ok(shapes.ProbeRoundStarted(await _call(request, lambda f: f.round_now())))


async def get_round(request: Request) -> Response:
    round_id = str(request.path_params["round_id"])
    return ok(await _call(request, lambda f: f.round(round_id)))


def _milliseconds(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if not (raw.isascii() and raw.isdigit()):
        raise InvalidRequest(f"{name} is {raw!r}; it must be a whole number of milliseconds")
    return int(raw)


async def report(request: Request) -> Response:
    since = _milliseconds(request, "since_ms")
    gap = _milliseconds(request, "min_gap_ms")
    min_gap = DEFAULT_MIN_GAP_MS if gap is None else parse_interval(gap / 1000, "min_gap_ms")
    return ok(await _call(request, lambda f: f.report(since, min_gap_ms=min_gap)))


ROUTES = [
    declared(BASE, list_all, "GET", PROBER_READ),
    declared(FLEET + "/targets", list_targets, "GET", PROBER_READ),
    declared(FLEET + "/targets", add_targets, "POST", PROBER_WRITE),
    declared(FLEET + "/targets", remove_target, "DELETE", PROBER_WRITE),
    declared(FLEET + "/rounds", start_round, "POST", PROBER_WRITE),
    declared(FLEET + "/rounds/{round_id}", get_round, "GET", PROBER_READ),
    declared(FLEET + "/report", report, "GET", PROBER_READ),
]
