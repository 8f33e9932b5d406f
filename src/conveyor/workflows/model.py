"""The plain data of workflows: what the store keeps and returns, and what users read.

Everything here is plain values (strings, numbers, JSON text), so a store can live behind HTTP as
well as in SQLite or PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
from typing import Any, Literal

Backoff = Literal["constant", "linear", "exponential"]
Status = Literal["queued", "running", "paused", "waitingForPause", "waiting", "errored", "terminated", "complete"]
STATUSES: tuple[str, ...] = (
    "queued",
    "running",
    "paused",
    "waitingForPause",
    "waiting",
    "errored",
    "terminated",
    "complete",
)
FINISHED = frozenset({"errored", "terminated", "complete"})
StepType = Literal["step", "sleep", "waitForEvent"]

DEFAULT_SUCCESS_RETENTION_MS = 3 * 86_400_000
DEFAULT_ERROR_RETENTION_MS = 7 * 86_400_000
DEFAULT_MAX_STEPS = 10_000
DEFAULT_STEP_TIMEOUT = 600.0
DEFAULT_EVENT_TIMEOUT = 86_400.0
MAX_SLEEP_SECONDS = 365 * 86_400
MAX_PAYLOAD_BYTES = 1 << 20
MAX_BATCH = 100


@dataclasses.dataclass(frozen=True)
class Retries:
    """How a failing ``step.do`` is retried: ``limit`` retries after the first attempt, waiting
    ``delay`` seconds (or ``"10 seconds"``) grown by ``backoff``: constant ``delay``, linear
    ``delay·n``, exponential ``delay·2^(n-1)`` after attempt n.

    >>> step.do("fetch", fetch, retries=conveyor.Retries(limit=3, delay="1 minute", backoff="linear"))
    """

    limit: int = 5
    delay: float | str = 10.0
    backoff: Backoff = "exponential"

    def delay_after(self, attempt: int, base: float) -> float:
        if self.backoff == "constant":
            return base
        if self.backoff == "linear":
            return base * attempt
        return base * float(2 ** (attempt - 1))


@dataclasses.dataclass(frozen=True)
class WorkflowSettings:
    """A workflow's settings: from the decorator, stored in its record."""

    script_name: str = ""
    schedules: tuple[str, ...] = ()
    max_steps: int = DEFAULT_MAX_STEPS
    concurrency: int | None = None
    success_retention_ms: int = DEFAULT_SUCCESS_RETENTION_MS
    error_retention_ms: int = DEFAULT_ERROR_RETENTION_MS

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "schedules": list(self.schedules)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkflowSettings:
        return cls(**{**data, "schedules": tuple(data.get("schedules", ()))})


@dataclasses.dataclass(frozen=True)
class WorkflowOverrides:
    """What a ``PUT /workflows/{name}`` (``cv.put_workflow``) set: each setting given overrides the
    code's (None: the code's stands), as wrangler's deploy config does; ``class_name`` and
    ``script_name`` name the code as Cloudflare's record does."""

    class_name: str | None = None
    script_name: str | None = None
    schedules: tuple[str, ...] | None = None
    max_steps: int | None = None
    concurrency: int | None = None
    success_retention_ms: int | None = None
    error_retention_ms: int | None = None

    def apply(self, settings: WorkflowSettings) -> WorkflowSettings:
        """``settings`` with every overridden one replaced."""
        given = {
            name: value
            for name, value in dataclasses.asdict(self).items()
            if value is not None and name not in ("class_name", "script_name")
        }
        if "schedules" in given:
            given["schedules"] = tuple(given["schedules"])
        return dataclasses.replace(settings, **given)

    def to_json(self) -> dict[str, Any]:
        data = {name: value for name, value in dataclasses.asdict(self).items() if value is not None}
        if "schedules" in data:
            data["schedules"] = list(data["schedules"])
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkflowOverrides:
        if "schedules" in data:
            data = {**data, "schedules": tuple(data["schedules"])}
        return cls(**data)

    @property
    def empty(self) -> bool:
        return not self.to_json()


def effective_version(code_version: str, overrides: WorkflowOverrides) -> str:
    """The version id of code ``code_version`` (a hash of the code and its settings; ``""`` when no
    worker registered code yet) under ``overrides``: the code's own id when nothing is
    overridden, else a hash of both, shaped as a UUID."""
    if overrides.empty and code_version:
        return code_version
    digest = hashlib.sha256(code_version.encode())
    digest.update(json.dumps(overrides.to_json(), sort_keys=True).encode())
    return uuid_shaped(digest.hexdigest())


def uuid_shaped(hex_digest: str) -> str:
    h = hex_digest[:32]
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclasses.dataclass(frozen=True)
class WorkflowRecord:
    """A workflow as stored: ``settings`` are the ones in force (the code's, with ``overrides``
    applied); ``code_settings`` the code's as its worker registered them (None until a worker
    did: a record a PUT made); ``version_id`` the hash of both (:func:`effective_version`)."""

    account: str
    name: str
    settings: WorkflowSettings
    version_id: str
    created_ms: int
    modified_ms: int
    code_settings: WorkflowSettings | None = None
    overrides: WorkflowOverrides = WorkflowOverrides()
    code_version: str = ""

    @property
    def script_name(self) -> str:
        """Cloudflare's ``script_name``: the PUT's, else the code's module."""
        if self.overrides.script_name is not None:
            return self.overrides.script_name
        return self.code_settings.script_name.partition(":")[0] if self.code_settings else ""

    @property
    def class_name(self) -> str:
        """Cloudflare's ``class_name``: the PUT's, else the code's function name."""
        if self.overrides.class_name is not None:
            return self.overrides.class_name
        return self.code_settings.script_name.partition(":")[2] if self.code_settings else ""


@dataclasses.dataclass(frozen=True)
class WorkflowVersion:
    """One version of a workflow: the settings in force under it, and when it was first seen."""

    id: str
    workflow: str
    settings: WorkflowSettings
    class_name: str
    script_name: str
    has_code: bool
    created_ms: int
    modified_ms: int


@dataclasses.dataclass(frozen=True)
class NewInstance:
    """An instance to create: ``traceparent`` is the context that creates it (its trace id is
    ``trace_id``), ``origin`` where it came from (JSON text, see :class:`InstanceRow`)."""

    id: str
    params: str  # JSON text
    trace_id: str
    traceparent: str | None = None
    origin: str | None = None


@dataclasses.dataclass(frozen=True)
class InstanceRow:
    """One instance as stored. ``epoch`` counts claims (a worker's writes carry the epoch it
    claimed, and are refused once another claim bumped it); ``run_token`` is the claim's own
    random token, which the run's writes carry too (refused unless both match: see
    ``SqlWorkflowStore.claim``); ``run_message`` is the internal queue message that drives the
    current run; ``wake_at_ms`` when a waiting instance is due;
    ``waiting_for`` the event type a ``wait_for_event`` waits for; ``scheduled_ms`` the cron tick
    that started it (None for one created otherwise)."""

    account: str
    workflow: str
    id: str
    status: str
    params: str
    output: str | None
    error: str | None
    trace_id: str
    version_id: str
    epoch: int
    run_message: str | None
    wake_at_ms: int | None
    waiting_for: str | None
    paused_at_ms: int | None
    resume_status: str | None
    created_ms: int
    modified_ms: int
    started_ms: int | None
    ended_ms: int | None
    scheduled_ms: int | None = None
    traceparent: str | None = None
    origin: str | None = None
    run_token: str | None = None


@dataclasses.dataclass(frozen=True)
class ScheduleRow:
    """A workflow with cron schedules: its expressions and the last tick that started an instance
    (at first, when the workflow was first registered with schedules)."""

    account: str
    workflow: str
    schedules: tuple[str, ...]
    last_tick_ms: int


@dataclasses.dataclass(frozen=True)
class Wakeup:
    """A wake-up message owed to an instance for an event written in the same transaction (a
    counter's notice): sent by the process that wrote it, or by the coordinator if it died first."""

    seq: int
    account: str
    workflow: str
    instance: str


@dataclasses.dataclass(frozen=True)
class CounterChange:
    """A counter's value after a change, and the wake-ups the change owes (its notices sent)."""

    value: int
    wakeups: list[Wakeup]


@dataclasses.dataclass(frozen=True)
class StepRow:
    """One step of an instance: ``key`` is ``type:name:occurrence``; ``seq`` its position;
    ``status`` ``running`` (an attempt failed and a retry is due), ``complete`` or ``errored``;
    ``attempts`` and ``config`` JSON text; ``output`` JSON text once complete."""

    key: str
    seq: int
    type: str
    name: str
    status: str
    output: str | None
    attempts: str
    config: str
    start_ms: int
    end_ms: int | None


@dataclasses.dataclass(frozen=True)
class Claim:
    instance: InstanceRow
    steps: list[StepRow]


@dataclasses.dataclass(frozen=True)
class EventRow:
    type: str
    payload: str
    timestamp_ms: int


# -- what users see ---------------------------------------------------------------------------
def _time(ms: int | None) -> datetime.datetime | None:
    return None if ms is None else datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)


@dataclasses.dataclass(frozen=True)
class WorkflowEvent:
    """What a workflow function gets: ``payload`` (the params), ``instance_id``, ``timestamp``
    (when the instance was created), ``workflow_name``, and ``schedule``: the cron tick that
    started it (a UTC datetime), None for an instance created otherwise."""

    payload: Any
    timestamp: datetime.datetime
    instance_id: str
    workflow_name: str
    schedule: datetime.datetime | None = None


@dataclasses.dataclass(frozen=True)
class ReceivedEvent:
    """What ``step.wait_for_event`` returns."""

    type: str
    payload: Any
    timestamp: datetime.datetime


@dataclasses.dataclass(frozen=True)
class Attempt:
    start: datetime.datetime | None
    end: datetime.datetime | None
    success: bool | None
    error: dict[str, str] | None


@dataclasses.dataclass(frozen=True)
class StepRecord:
    """A step as ``status()`` shows it: ``name`` with its occurrence (``"fetch-1"``), ``type``
    (``step``, ``sleep``, ``waitForEvent``), ``success`` (None while unfinished), ``output``,
    ``config`` and ``attempts`` (``step`` only), ``error`` of a failed one."""

    name: str
    type: str
    start: datetime.datetime | None
    end: datetime.datetime | None
    success: bool | None
    output: Any
    config: dict[str, Any]
    attempts: list[Attempt]
    error: dict[str, str] | None


@dataclasses.dataclass(frozen=True)
class InstanceStatus:
    """``status()`` of an instance: ``status`` (one of :data:`STATUSES`), ``output`` (the workflow's
    return value once complete), ``error`` (``{name, message}``), ``steps``, ``params``, times and
    ``trace_id``."""

    id: str
    workflow: str
    status: str
    output: Any
    error: dict[str, str] | None
    steps: list[StepRecord]
    params: Any
    queued: datetime.datetime | None
    start: datetime.datetime | None
    end: datetime.datetime | None
    version_id: str
    trace_id: str

    @property
    def success(self) -> bool | None:
        return None if self.status not in FINISHED else self.status == "complete"


@dataclasses.dataclass(frozen=True)
class InstanceSummary:
    """One row of ``list_instances``."""

    id: str
    status: str
    created_on: datetime.datetime | None
    modified_on: datetime.datetime | None
    started_on: datetime.datetime | None
    ended_on: datetime.datetime | None
    version_id: str


@dataclasses.dataclass(frozen=True)
class InstancePage:
    instances: list[InstanceSummary]
    cursor: str | None
