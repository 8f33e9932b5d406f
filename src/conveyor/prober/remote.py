"""A fleet behind ``conveyor serve``: ``conveyor.prober.fleet(connect("http://..."), "mcp")`` speaks
the server's prober routes (:mod:`conveyor.server.prober_routes`), with the same methods as an
embedded :class:`~conveyor.prober.Fleet`. Targets added this way pass the server's egress policy.

>>> cv = conveyor.connect("http://127.0.0.1:8787", token="...", account_id="acc1")
>>> conveyor.prober.fleet(cv, "mcp").add("https://mcp.example.com/health")
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from conveyor import egress as egress_refusals
from conveyor import errors
from conveyor.client.http import RouteClient
from conveyor.egress import EgressPolicy
from conveyor.errors import ConveyorError, InvalidRequest
from conveyor.prober import errors as prober_errors
from conveyor.prober.fleet import FleetHandle
from conveyor.prober.model import FleetRow, Target, check_fleet_name
from conveyor.prober.report import DEFAULT_MIN_GAP_MS, Report, RoundSummary
from conveyor.wire import prober as shapes

if TYPE_CHECKING:
    from conveyor.client.sync import Conveyor

T = TypeVar("T")
_BY_STATUS: dict[int, type[ConveyorError]] = {
    401: errors.Unauthorized,
    403: errors.Forbidden,
    404: prober_errors.TargetNotFound,
    409: prober_errors.NoProberWorker,
}


def _session(cv: Conveyor) -> RouteClient:
    """The HTTP client of a server's prober routes, one per client (``cv.component``)."""
    return cv.component(
        "prober-http",
        lambda deployment, clock: RouteClient(
            deployment, "/prober/fleets", prober_errors, egress_refusals, by_status=_BY_STATUS
        ),
    )


def _fleets(session: RouteClient) -> list[FleetRow]:
    found: list[FleetRow] = session.call(list[FleetRow], "GET", "")
    return found


def remote_fleets(cv: Conveyor) -> list[FleetRow]:
    """The fleets of the server's account."""
    return _fleets(_session(cv))


class RemoteFleet(FleetHandle):
    """The fleet ``name`` of the server's account (see :class:`conveyor.prober.Fleet`)."""

    def __init__(self, cv: Conveyor, name: str) -> None:
        self._session = _session(cv)
        self.name = check_fleet_name(name)
        self._path = "/" + quote(self.name, safe="")

    def info(self) -> FleetRow | None:
        return next((row for row in _fleets(self._session) if row.fleet == self.name), None)

    def import_targets(
        self, items: Iterable[Mapping[str, Any]], *, egress: EgressPolicy | None = None
    ) -> tuple[int, int]:
        """Add targets on the server (its own egress policy checks them; ``egress`` is not sent)."""
        if egress is not None:
            raise InvalidRequest("the server applies its own egress policy; give none over http://")
        added: shapes.ProbeTargetsAdded = self._session.call(
            shapes.ProbeTargetsAdded, "POST", self._path + "/targets", [dict(item) for item in items]
        )
        return added.added, added.already_listed

    def targets(self) -> list[Target]:
        found: list[Target] = self._session.call(list[Target], "GET", self._path + "/targets")
        return found

    def remove(self, key: str) -> list[str]:
        removed: shapes.ProbeTargetsRemoved = self._session.call(
            shapes.ProbeTargetsRemoved, "DELETE", self._path + "/targets", params={"key": key}
        )
        return removed.removed

    def round(self, round_id: str) -> RoundSummary | None:
        found: RoundSummary | None = self._session.call(
            RoundSummary | None, "GET", f"{self._path}/rounds/{quote(round_id, safe='')}"
        )
        return found

    def start_round(self) -> str:
        started: shapes.ProbeRoundStarted = self._session.call(shapes.ProbeRoundStarted, "POST", self._path + "/rounds")
        return started.id

    def report(self, since_ms: int | None = None, *, min_gap_ms: int = DEFAULT_MIN_GAP_MS) -> Report:
        params = {"min_gap_ms": min_gap_ms} if since_ms is None else {"since_ms": since_ms, "min_gap_ms": min_gap_ms}
        found: Report = self._session.call(Report, "GET", self._path + "/report", params=params)
        return found
