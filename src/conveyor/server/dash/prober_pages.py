"""The dashboard's prober pages (read-only): an account's fleets, one fleet's targets, its report
(``conveyor probe report``'s figures over the last 24 hours) and its rounds, and one round's table
of jobs. Read through :mod:`conveyor.prober`'s API (``list_fleets``, ``Fleet``) and, for the list of
rounds and a round's jobs, which the API has no call for yet, the prober's store
(``probe_store(cv).history`` / ``.round``, the reads ``Fleet.report`` and ``Fleet.round`` make)."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from conveyor.prober import TargetNotFound, list_fleets
from conveyor.prober.fleet import DEFAULT_REPORT_MS, Fleet
from conveyor.prober.model import Job, check_fleet_name
from conveyor.prober.report import summarize_round
from conveyor.prober.store import probe_store
from conveyor.server.dash.pages import Visit, account_client, page, render, when
from conveyor.server.service import blocking

ROUNDS_SHOWN = 50  # the newest rounds of the report's window a fleet's page lists
DETAIL_CHARS = 300  # a job's details (its check's returned JSON), cut in the table


def _fleet(request: Request, visit: Visit) -> tuple[str, Any, Fleet]:
    account, client = account_client(request, visit, "prober fleets")
    fleet = Fleet(client, check_fleet_name(request.path_params["fleet"]))
    if fleet.info() is None:
        raise TargetNotFound(f"fleet {fleet.name!r} has no targets and no worker")
    return account, client, fleet


@page
async def fleets(request: Request, visit: Visit) -> Response:
    def context() -> dict[str, Any]:
        account, client = account_client(request, visit, "prober fleets")
        return {"account": account, "visit": visit, "fleets": list_fleets(client), "when": when}

    return render("prober.html", **await blocking(context))


@page
async def fleet_page(request: Request, visit: Visit) -> Response:
    def context() -> dict[str, Any]:
        account, client, fleet = _fleet(request, visit)
        now = client.engine.clock.now_ms()
        since = now - DEFAULT_REPORT_MS
        jobs, rounds, _ = probe_store(client).history(account, fleet.name, since)
        by_round: dict[str, list[Job]] = defaultdict(list)
        for job in jobs:
            by_round[job.round_id].append(job)
        newest = sorted(rounds, key=lambda r: r.claimed_ms, reverse=True)[:ROUNDS_SHOWN]
        return {
            "account": account,
            "visit": visit,
            "fleet": fleet.info(),
            "targets": fleet.targets(),
            "report": fleet.report(since),
            "rounds": [summarize_round(r, by_round[r.id]) for r in newest],
            "round_count": len(rounds),
            "when": when,
        }

    return render("prober_fleet.html", **await blocking(context))


def _detail(text: str | None) -> str:
    if not text:
        return ""
    try:
        shown = json.dumps(json.loads(text), ensure_ascii=False, sort_keys=True)
    except ValueError:
        shown = text
    return shown if len(shown) <= DETAIL_CHARS else shown[:DETAIL_CHARS] + "…"


@page
async def round_page(request: Request, visit: Visit) -> Response:
    def context() -> dict[str, Any]:
        account, client, fleet = _fleet(request, visit)
        round_id = request.path_params["round_id"]
        found = probe_store(client).round(account, fleet.name, round_id)
        if found is None:
            raise TargetNotFound(f"fleet {fleet.name!r} has no round {round_id[:100]!r}")
        row, jobs = found
        jobs = sorted(jobs, key=lambda j: (j.slot, j.address))
        return {
            "account": account,
            "visit": visit,
            "fleet": fleet.info(),
            "summary": summarize_round(row, jobs),
            "jobs": [(job, _detail(job.detail)) for job in jobs],
            "when": when,
        }

    return render("prober_round.html", **await blocking(context))
