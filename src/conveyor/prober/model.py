"""What the prober's rows are, and the checks that turn user input into them: fleet names, target
addresses and hosts, check names, intervals and a round's shape. Every bad value is an
:class:`~conveyor.prober.errors.InvalidTarget` naming it and the limit.

>>> parse_address("https://mcp.example.com/health", "http")
('https://mcp.example.com/health', 'mcp.example.com')
>>> parse_interval("12h")
43200000
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Literal
from urllib.parse import urlsplit

from conveyor.prober.errors import InvalidTarget
from conveyor.workflows.durations import parse_duration
from conveyor.workflows.errors import InvalidStepConfig

JobState = Literal["claimed", "running", "finished", "abandoned", "cancelled"]
OPEN_STATES = ("claimed", "running")
HTTP_CHECK = "http"
DEFAULT_INTERVAL_MS = 12 * 3600 * 1000
MAX_INTERVAL_MS = 365 * 86_400 * 1000
MAX_ADDRESS = 2048
MAX_MESSAGES = 1000
MAX_PER_MESSAGE = 100
MAX_AT_A_TIME = 100
MAX_TARGETS_PER_ROUND = 10_000

_FLEET = re.compile(r"^[a-z0-9][a-z0-9_-]{0,49}\Z")
_CHECK = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}\Z")
_SHORT_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*\Z")
_SHORT_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0, "w": 7 * 86_400.0}


def check_fleet_name(name: object) -> str:
    if not isinstance(name, str) or not _FLEET.match(name):
        raise InvalidTarget(
            f"invalid fleet name {name!r}: use 1 to 50 lower-case letters, digits, '_' and '-', "
            "starting with a letter or digit"
        )
    return name


def check_check_name(name: object) -> str:
    if not isinstance(name, str) or not _CHECK.match(name):
        raise InvalidTarget(
            f"invalid check name {name!r}: use 1 to 64 lower-case letters, digits, '_', '.' and '-', "
            "starting with a letter or digit"
        )
    return name


def parse_address(address: object, check: str, host: object = None) -> tuple[str, str]:
    """``(address, host)``: an ``http`` target's address is an http(s) URL; any other check's is a
    URL or ``host[:port][/...]``. The host (lower-case, without port) is the URL's unless ``host``
    names one."""
    if not isinstance(address, str) or not address or len(address) > MAX_ADDRESS:
        raise InvalidTarget(f"target address {address!r} must be a string of 1 to {MAX_ADDRESS} characters")
    if any(c.isspace() or ord(c) < 32 for c in address):
        raise InvalidTarget(f"target address {address!r} contains whitespace or control characters")
    is_url = "://" in address
    if check == HTTP_CHECK and (not is_url or urlsplit(address).scheme.lower() not in ("http", "https")):
        raise InvalidTarget(f"target {address!r}: an http check's address is an http:// or https:// URL")
    try:
        parts = urlsplit(address if is_url else "//" + address)
        found = parts.hostname
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError as exc:
        raise InvalidTarget(f"target address {address!r} is not a valid URL or host: {exc}") from None
    if host is not None:
        if not isinstance(host, str) or not host or len(host) > 253 or any(c.isspace() or c in "/@?#" for c in host):
            raise InvalidTarget(f"target host {host!r} is not a host name or address")
        return address, host.lower().strip("[]")
    if not found:
        raise InvalidTarget(f"target address {address!r} names no host")
    return address, found.lower()


def parse_interval(value: object, what: str = "interval") -> int:
    """Milliseconds in ``value``: seconds (a number, or a string of one), ``"12h"`` (s, m, h, d, w),
    or ``"12 hours"``; 0 to 365 days."""
    if isinstance(value, str) and (short := _SHORT_INTERVAL.match(value.lower())):
        seconds = float(short.group(1)) * _SHORT_UNITS[short.group(2)]
    else:
        try:
            seconds = parse_duration(value, what)
        except InvalidStepConfig as exc:
            raise InvalidTarget(exc.message.replace("give seconds", "give seconds, '12h'")) from None
    ms = round(seconds * 1000)
    if ms > MAX_INTERVAL_MS:
        raise InvalidTarget(f"{what} is {value!r}; the limit is 365 days")
    return ms


def _whole(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidTarget(f"{name} is {value!r}; it must be a whole number from {low} to {high}")
    return value


@dataclasses.dataclass(frozen=True)
class Shape:
    """How a round fans out: ``messages`` messages of at most ``per_message`` targets, each checking
    ``at_a_time`` at once; ``messages=0`` checks the round's targets one after another where it was
    claimed (the single loop)."""

    messages: int
    per_message: int
    at_a_time: int

    def __post_init__(self) -> None:
        _whole("messages", self.messages, 0, MAX_MESSAGES)
        _whole("per_message", self.per_message, 1, MAX_PER_MESSAGE)
        _whole("at_a_time", self.at_a_time, 1, MAX_AT_A_TIME)

    def __str__(self) -> str:
        """``19 × 5 × 3``, or ``single loop``."""
        return f"{self.messages} × {self.per_message} × {self.at_a_time}" if self.messages else "single loop"

    @property
    def limit(self) -> int:
        """The most targets one round claims."""
        return MAX_TARGETS_PER_ROUND if self.messages == 0 else self.messages * self.per_message


@dataclasses.dataclass(frozen=True)
class FleetRow:
    """A fleet as its worker registered it (``registered_ms`` None: no worker has yet)."""

    account: str
    fleet: str
    created_ms: int
    registered_ms: int | None
    checks: tuple[str, ...]
    shape: Shape | None
    schedule: str | None
    lease_ms: int | None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Target:
    """A target of a fleet, with the outcome of its latest job (``last_state`` None: never claimed)."""

    id: str
    address: str
    host: str
    check: str
    interval_ms: int
    added_ms: int
    due_ms: int
    last_state: JobState | None = None
    last_ended_ms: int | None = None
    last_ok: bool | None = None
    last_latency_ms: int | None = None
    last_error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class NewTarget:
    """A checked target to add."""

    address: str
    host: str
    check: str
    interval_ms: int


@dataclasses.dataclass(frozen=True)
class Job:
    """One check of one target in one round (the columns of ``prober_jobs``)."""

    id: str
    account: str
    fleet: str
    round_id: str
    target_id: str
    address: str
    host: str
    check: str
    slot: int
    mark_ms: int
    state: JobState
    claimed_ms: int
    lease_until_ms: int
    started_ms: int | None
    ended_ms: int | None
    runner: str | None
    ok: bool | None
    latency_ms: int | None
    error: str | None
    detail: str | None


@dataclasses.dataclass(frozen=True)
class RoundRow:
    id: str
    trigger: str
    mark_ms: int
    claimed_ms: int
    shape: Shape
    jobs: int


@dataclasses.dataclass(frozen=True)
class CheckOutcome:
    """What one check found: ``ok``, how long it took, why it failed, and its details (JSON)."""

    ok: bool
    latency_ms: int
    error: str | None = None
    detail: dict[str, Any] = dataclasses.field(default_factory=dict)
