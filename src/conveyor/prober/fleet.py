"""``Fleet``: one fleet's targets, rounds and report, for any client of a deployment (the CLI, the
server's routes, a script). The worker's :class:`~conveyor.prober.Prober` has one too.

>>> fleet = conveyor.prober.fleet(cv, "mcp")
>>> fleet.add("https://mcp.example.com/health", interval="12h")
True
>>> fleet.import_targets([{"address": "https://a.example.com/", "check": "http"}])
(1, 0)
>>> fleet.round_now(wait=True).seconds          # a round now, run by the fleet's worker
>>> fleet.report(since_ms=...).host_overlaps
0
"""

from __future__ import annotations

import secrets
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from conveyor.egress import EgressPolicy, check_url
from conveyor.prober.errors import InvalidTarget, NoProberWorker, UnknownCheck
from conveyor.prober.model import (
    DEFAULT_INTERVAL_MS,
    HTTP_CHECK,
    FleetRow,
    NewTarget,
    Target,
    check_check_name,
    check_fleet_name,
    parse_address,
    parse_interval,
)
from conveyor.prober.report import DEFAULT_MIN_GAP_MS, Report, RoundSummary, build_report, summarize_round
from conveyor.prober.store import probe_store

if TYPE_CHECKING:
    from conveyor.client.sync import Conveyor

TARGET_FIELDS = frozenset({"address", "check", "interval", "host"})
MAX_IMPORT = 10_000
POLL_SECONDS = 0.02
DEFAULT_REPORT_MS = 24 * 3600 * 1000


def workflow_name(fleet: str) -> str:
    """The workflow whose instances are the fleet's ticks (cron, or ``round --now``)."""
    return f"prober-{fleet}"


def queue_name(fleet: str) -> str:
    """The queue of the fleet's fan-out messages."""
    return f"prober-{fleet}"


def check_target(item: Mapping[str, Any], known_checks: Iterable[str], egress: EgressPolicy | None = None) -> NewTarget:
    """A checked :class:`NewTarget` from ``{"address", "check", "interval", "host"}`` (only
    ``address`` is required; ``check`` is ``http`` by default, ``interval`` 12 h). A check name no
    worker of the fleet registered is refused; ``egress``: the server's policy for the address."""
    if not isinstance(item, Mapping):
        raise InvalidTarget(f"a target is an object with an address, not {item!r}")
    unknown = sorted(set(item) - TARGET_FIELDS)
    if unknown:
        raise InvalidTarget(
            f"unknown target field(s) {', '.join(map(repr, unknown))}; a target has {', '.join(sorted(TARGET_FIELDS))}"
        )
    if "address" not in item:
        raise InvalidTarget("a target needs an address")
    check = check_check_name(item.get("check", HTTP_CHECK))
    known = sorted(set(known_checks) | {HTTP_CHECK})
    if check not in known:
        raise UnknownCheck(
            f"check {check!r} is not registered for this fleet (known: {', '.join(known)}); start the worker whose "
            f"code registers it with @prober.check({check!r}) first"
        )
    address, host = parse_address(item["address"], check, item.get("host"))
    interval = item.get("interval")
    interval_ms = DEFAULT_INTERVAL_MS if interval is None else parse_interval(interval)
    if egress is not None:
        check_url(address if check == HTTP_CHECK else f"https://{host}/", egress)
    return NewTarget(address, host, check, interval_ms)


class FleetHandle(ABC):
    """What a fleet offers to any client: :class:`Fleet` on the deployment's own URL, and
    :class:`~conveyor.prober.remote.RemoteFleet` over ``conveyor serve``."""

    name: str

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @abstractmethod
    def info(self) -> FleetRow | None:
        """The fleet as its worker registered it (checks, shape, schedule); None if it has no
        targets and no worker registered it yet."""

    @abstractmethod
    def import_targets(
        self, items: Iterable[Mapping[str, Any]], *, egress: EgressPolicy | None = None
    ) -> tuple[int, int]:
        """Add many targets in one transaction: all of them are checked first, and one bad item
        adds none. ``(added, already listed)``."""

    @abstractmethod
    def targets(self) -> list[Target]:
        """The fleet's targets by address, each with its latest job's outcome."""

    @abstractmethod
    def remove(self, key: str) -> list[str]:
        """Remove the target of id ``key``, or the targets of address ``key``; their jobs not yet
        started are cancelled. The removed ones; ``TargetNotFound`` if none."""

    @abstractmethod
    def round(self, round_id: str) -> RoundSummary | None:
        """The round ``round_id`` as it stands (None if it has not been claimed yet)."""

    @abstractmethod
    def start_round(self) -> str:
        """Ask the fleet's worker for a round now; the round's id."""

    @abstractmethod
    def report(self, since_ms: int | None = None, *, min_gap_ms: int = DEFAULT_MIN_GAP_MS) -> Report:
        """The fleet's figures for the jobs claimed since ``since_ms`` (the last 24 hours by default)."""

    def known_checks(self) -> list[str]:
        """The check names a target of the fleet may name."""
        row = self.info()
        return sorted({HTTP_CHECK, *(row.checks if row else ())})

    def add(
        self,
        address: str,
        *,
        check: str = HTTP_CHECK,
        interval: float | str | None = None,
        host: str | None = None,
        egress: EgressPolicy | None = None,
    ) -> bool:
        """Add a target, due at once; False if the fleet lists it already (same address and check).
        ``interval``: seconds or ``"12h"`` (12 hours by default)."""
        item: dict[str, Any] = {"address": address, "check": check}
        if interval is not None:
            item["interval"] = interval
        if host is not None:
            item["host"] = host
        added, _ = self.import_targets([item], egress=egress)
        return added == 1

    def wait_for_round(self, round_id: str, timeout: float) -> RoundSummary:
        """The round once every job of it has ended (``TimeoutError`` after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while True:
            summary = self.round(round_id)
            if summary is not None and summary.done:
                return summary
            if time.monotonic() > deadline:
                state = "not claimed yet" if summary is None else f"jobs {summary.states}"
                raise TimeoutError(f"round {round_id} of fleet {self.name} did not end within {timeout:g} s ({state})")
            time.sleep(POLL_SECONDS)

    def round_now(self, *, wait: bool = False, timeout: float = 600.0) -> str:
        """Ask the fleet's worker for a round now (an instance of its tick workflow, as a cron tick
        would start); the round's id. ``wait``: return once it has ended. ``NoProberWorker`` if no
        worker ever ran the fleet."""
        round_id = self.start_round()
        if wait:
            self.wait_for_round(round_id, timeout)
        return round_id


class Fleet(FleetHandle):
    """The fleet ``name`` of ``cv``'s account. ``checks``: check names the caller's own code
    registered (a worker's prober's), known even before its worker first started."""

    def __init__(self, cv: Conveyor, name: str, *, checks: Iterable[str] = ()) -> None:
        self._cv = cv
        self.name = check_fleet_name(name)
        self._local_checks = checks  # a live view: a worker's prober registers more later

    @property
    def _account(self) -> str:
        return self._cv.deployment.account

    def _now(self) -> int:
        return self._cv.engine.clock.now_ms()

    def info(self) -> FleetRow | None:
        return probe_store(self._cv).fleet(self._account, self.name)

    def known_checks(self) -> list[str]:
        return sorted({*super().known_checks(), *self._local_checks})

    def import_targets(
        self, items: Iterable[Mapping[str, Any]], *, egress: EgressPolicy | None = None
    ) -> tuple[int, int]:
        known = self.known_checks()
        targets = []
        for n, item in enumerate(items, 1):
            if n > MAX_IMPORT:
                raise InvalidTarget(f"more than {MAX_IMPORT} targets at once; import them in parts")
            try:
                targets.append(check_target(item, known, egress))
            except InvalidTarget as exc:
                raise type(exc)(f"target {n}: {exc.message}") from None
        return probe_store(self._cv).add_targets(self._account, self.name, targets, self._now())

    def targets(self) -> list[Target]:
        return probe_store(self._cv).targets(self._account, self.name)

    def remove(self, key: str) -> list[str]:
        if not isinstance(key, str) or not key:
            raise InvalidTarget(f"{key!r} is not a target id or address")
        return probe_store(self._cv).remove_target(self._account, self.name, key, self._now())

    # -- rounds -------------------------------------------------------------------------------
    def round(self, round_id: str) -> RoundSummary | None:
        found = probe_store(self._cv).round(self._account, self.name, round_id)
        return None if found is None else summarize_round(*found)

    def start_round(self) -> str:
        from conveyor.workflows.errors import WorkflowNotFound

        now = self._now()
        try:
            workflow = self._cv.workflow(workflow_name(self.name))
        except WorkflowNotFound:
            raise NoProberWorker(
                f"fleet {self.name!r} has no worker yet: run one whose code creates "
                f"conveyor.Prober(..., fleet={self.name!r}), or `conveyor probe worker --fleet {self.name}`"
            ) from None
        return workflow.create(params={"mark_ms": now}, id=f"now-{now}-{secrets.token_hex(3)}").id

    # -- report -------------------------------------------------------------------------------
    def report(self, since_ms: int | None = None, *, min_gap_ms: int = DEFAULT_MIN_GAP_MS) -> Report:
        now = self._now()
        since = now - DEFAULT_REPORT_MS if since_ms is None else since_ms
        jobs, rounds, listed = probe_store(self._cv).history(self._account, self.name, since)
        return build_report(self.name, jobs, rounds, listed, since_ms=since, now_ms=now, min_gap_ms=min_gap_ms)


def fleet(cv: Conveyor, name: str) -> FleetHandle:
    """The fleet ``name`` of ``cv``'s account (see :class:`Fleet`); over ``http://``, its twin
    speaking the server's routes."""
    if cv.deployment.kind == "http":
        from conveyor.prober.remote import RemoteFleet

        return RemoteFleet(cv, name)
    return Fleet(cv, name)


def list_fleets(cv: Conveyor) -> list[FleetRow]:
    """The fleets of ``cv``'s account, by name."""
    if cv.deployment.kind == "http":
        from conveyor.prober.remote import remote_fleets

        return remote_fleets(cv)
    return probe_store(cv).fleets(cv.deployment.account)
