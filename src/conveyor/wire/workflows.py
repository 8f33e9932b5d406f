"""Cloudflare Workflows' REST shapes, as the ``cloudflare`` SDK's ``workflows.*`` send and read
them (``types/workflows/*.py``) and wrangler's ``workflows`` commands do, and their mapping from
:mod:`conveyor.workflows.model`.

Where the wire is camelCase (``versionId``, ``instanceId``, ``scheduledTime``) the field says so.
Times are ISO 8601 in UTC. A step of an instance is one of three shapes, told apart by its
``type`` (``step``, ``sleep``, ``waitForEvent``), as Cloudflare's are.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from conveyor.wire.decoding import Shape
from conveyor.workflows.errors import InvalidStepConfig
from conveyor.workflows.model import (
    FINISHED,
    InstanceStatus,
    InstanceSummary,
    StepRecord,
    WorkflowRecord,
    WorkflowVersion,
)

Status = Literal[
    "queued", "running", "paused", "errored", "terminated", "complete", "waitingForPause", "waiting", "rollingBack"
]
TriggerSource = Literal["unknown", "api", "binding", "event", "cron"]
LocationHint = Literal["wnam", "weur", "enam", "eeur", "apac", "apac-ne", "apac-se", "oc", "sam", "afr", "me"]
# Conveyor's namespace for the ids of workflows (Cloudflare gives each a UUID; here it is derived
# from the account and the name, so a record made again has the same id).
WORKFLOW_IDS = uuid.UUID("3f1d1c52-8d0a-4f0e-9a57-3c5f0b1f6e21")


class WorkflowError(Shape):
    name: str
    message: str


# -- requests --------------------------------------------------------------------------------------
class Concurrency(Shape):
    limit: int


class Retention(Shape, kw_only=True):
    """Milliseconds, or a duration such as ``"5 minutes"``."""

    success_retention: int | str | UnsetType = UNSET
    error_retention: int | str | UnsetType = UNSET


class Limits(Shape):
    steps: int


class Schedule(Shape):
    cron: str


class WorkflowRequest(Shape, kw_only=True):
    """``PUT /workflows/{name}`` (``workflows.update``, wrangler's deploy). The settings given
    override the code's; ``jurisdiction`` is accepted only as ``us`` or left out (a Conveyor
    deployment keeps its data where its storage is)."""

    class_name: str
    script_name: str
    concurrency: Concurrency | None = None
    default_retention: Retention | None = None
    limits: Limits | None = None
    schedules: list[Schedule] | None = None
    jurisdiction: str | None = None


class CreateInstance(Shape, kw_only=True):
    """One instance to create: ``params`` is any JSON (wrangler sends an object); a string that
    parses as JSON (what the SDK's ``params: str`` means) is that JSON. ``location_hint`` is
    accepted and has no effect: a deployment runs where its workers are."""

    instance_id: str | None = None
    params: Any = None
    instance_retention: Retention | None = None
    location_hint: LocationHint | None = None


class RestartFrom(Shape, kw_only=True):
    """The step a restart begins at: its name, occurrence and type (``do``, ``sleep``,
    ``waitForEvent``; checked by ``Instance.restart``)."""

    refusal = InvalidStepConfig

    name: str
    count: int = 1
    type: str = "do"


class StatusChange(Shape, kw_only=True):
    """``PATCH .../status``: ``rollback`` with ``terminate``, ``from`` with ``restart``."""

    status: Literal["pause", "resume", "terminate", "restart"]
    rollback: bool | None = None
    from_: RestartFrom | None = msgspec.field(default=None, name="from")


class BatchDelete(Shape):
    instances: list[str]


# -- results ---------------------------------------------------------------------------------------
class ScheduleInfo(Shape):
    cron: str
    next_instance: str | None = None


class Workflow(Shape, kw_only=True):
    id: str
    name: str
    class_name: str
    script_name: str
    created_on: datetime.datetime
    modified_on: datetime.datetime
    triggered_on: datetime.datetime | None = None
    instances: dict[str, int]
    schedules: list[ScheduleInfo]
    # Conveyor's: the version in force, and whether a live worker runs the workflow (without one,
    # its instances stay queued).
    version_id: str
    has_worker: bool


class WorkflowUpdated(Shape, kw_only=True):
    id: str
    name: str
    class_name: str
    script_name: str
    created_on: datetime.datetime
    modified_on: datetime.datetime
    triggered_on: datetime.datetime | None = None
    version_id: str
    is_deleted: int = 0
    terminator_running: int = 0


class Deleted(Shape, kw_only=True):
    status: Literal["ok"] = "ok"
    success: bool = True


class RetentionMs(Shape):
    success_retention: int
    error_retention: int


class OptionalConcurrency(Shape):
    limit: int | None = None


class Version(Shape, kw_only=True):
    id: str
    workflow_id: str
    class_name: str
    created_on: datetime.datetime
    modified_on: datetime.datetime
    has_dag: bool = False
    language: Literal["javascript", "python"] = "python"
    concurrency: OptionalConcurrency
    default_retention: RetentionMs
    limits: Limits
    # Conveyor's: whether a worker registered code under this version (a PUT alone has none).
    has_code: bool


class VersionGraph(Shape, kw_only=True):
    """No graph: Conveyor does not parse a workflow's code into one."""

    id: str
    workflow_id: str
    class_name: str
    created_on: datetime.datetime
    modified_on: datetime.datetime
    graph: None = None


class InstanceCreated(Shape, kw_only=True):
    id: str
    status: Status
    version_id: str
    workflow_id: str
    trigger_source: TriggerSource = "api"


class InstanceListed(Shape, kw_only=True):
    id: str
    status: Status
    created_on: datetime.datetime
    modified_on: datetime.datetime
    started_on: datetime.datetime | None = None
    ended_on: datetime.datetime | None = None
    version_id: str
    workflow_id: str
    trigger_source: TriggerSource = "api"


class Retries(Shape, kw_only=True):
    limit: int
    delay: float | str
    backoff: Literal["constant", "linear", "exponential"] | None = None


class StepConfig(Shape, kw_only=True):
    retries: Retries
    timeout: float | str


class Attempt(Shape, kw_only=True):
    start: datetime.datetime | None
    end: datetime.datetime | None = None
    success: bool | None = None
    error: WorkflowError | None = None


class DoStep(Shape, tag_field="type", tag="step", kw_only=True):
    name: str
    start: datetime.datetime | None
    end: datetime.datetime | None = None
    success: bool | None = None
    output: Any = None
    config: StepConfig
    attempts: list[Attempt]


class SleepStep(Shape, tag_field="type", tag="sleep", kw_only=True):
    name: str
    start: datetime.datetime | None
    end: datetime.datetime | None
    finished: bool
    error: WorkflowError | None = None


class WaitStep(Shape, tag_field="type", tag="waitForEvent", kw_only=True):
    name: str
    start: datetime.datetime | None
    end: datetime.datetime | None
    finished: bool
    error: WorkflowError | None = None
    event_type: str | None = None
    output: Any = None


class Trigger(Shape):
    source: TriggerSource


class InstanceSchedule(Shape, kw_only=True):
    cron: str
    scheduled_time: int = msgspec.field(name="scheduledTime")


class InstanceDetail(Shape, kw_only=True):
    """``GET .../instances/{id}``: the instance with every step (``simple=true``: none, only
    ``step_count``)."""

    status: Status
    params: Any
    output: Any = None
    error: WorkflowError | None = None
    queued: datetime.datetime | None
    start: datetime.datetime | None = None
    end: datetime.datetime | None = None
    success: bool | None = None
    trigger: Trigger
    version_id: str = msgspec.field(name="versionId")
    step_count: int
    steps: list[DoStep | SleepStep | WaitStep]
    schedule: InstanceSchedule | UnsetType = UNSET


class StepDetail(Shape, kw_only=True):
    """``GET .../instances/{id}/step``: one step's status, full output and error."""

    status: Status
    output: Any = None
    error: WorkflowError | None = None
    event_type: str | UnsetType = UNSET


class StatusChanged(Shape, kw_only=True):
    status: Status
    timestamp: datetime.datetime


class EventSent(Shape, kw_only=True):
    instance_id: str = msgspec.field(name="instanceId")
    timestamp: datetime.datetime


class DeletedId(Shape):
    id: str


class DeleteError(Shape):
    id: str
    code: int
    message: str


class BatchDeleted(Shape):
    deleted: list[DeletedId]
    errors: list[DeleteError]


class TerminateStarted(Shape):
    status: Literal["ok"] = "ok"


# -- from the model --------------------------------------------------------------------------------
def _time(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)


def workflow_id(record: WorkflowRecord | WorkflowVersion, account: str = "") -> str:
    name = record.name if isinstance(record, WorkflowRecord) else record.workflow
    owner = record.account if isinstance(record, WorkflowRecord) else account
    return str(uuid.uuid5(WORKFLOW_IDS, f"{owner}/{name}"))


def _record_fields(record: WorkflowRecord) -> dict[str, Any]:
    return {
        "id": workflow_id(record),
        "name": record.name,
        "class_name": record.class_name,
        "script_name": record.script_name,
        "created_on": _time(record.created_ms),
        "modified_on": _time(record.modified_ms),
        "version_id": record.version_id,
    }


def workflow(record: WorkflowRecord, counts: dict[str, int], has_worker: bool) -> Workflow:
    schedules = [ScheduleInfo(cron) for cron in record.settings.schedules]
    return Workflow(**_record_fields(record), instances=counts, schedules=schedules, has_worker=has_worker)


def workflow_updated(record: WorkflowRecord) -> WorkflowUpdated:
    return WorkflowUpdated(**_record_fields(record))


def _version_fields(v: WorkflowVersion, account: str) -> dict[str, Any]:
    return {
        "id": v.id,
        "workflow_id": workflow_id(v, account),
        "class_name": v.class_name,
        "created_on": _time(v.created_ms),
        "modified_on": _time(v.modified_ms),
    }


def version(v: WorkflowVersion, account: str) -> Version:
    return Version(
        **_version_fields(v, account),
        concurrency=OptionalConcurrency(v.settings.concurrency),
        default_retention=RetentionMs(v.settings.success_retention_ms, v.settings.error_retention_ms),
        limits=Limits(v.settings.max_steps),
        has_code=v.has_code,
    )


def version_graph(v: WorkflowVersion, account: str) -> VersionGraph:
    return VersionGraph(**_version_fields(v, account))


def trigger_source(scheduled: bool) -> TriggerSource:
    return "cron" if scheduled else "api"


def instance_listed(s: InstanceSummary, wf_id: str, scheduled: bool) -> InstanceListed:
    assert s.created_on is not None and s.modified_on is not None
    return InstanceListed(
        id=s.id,
        status=s.status,  # type: ignore[arg-type]
        created_on=s.created_on,
        modified_on=s.modified_on,
        started_on=s.started_on,
        ended_on=s.ended_on,
        version_id=s.version_id,
        workflow_id=wf_id,
        trigger_source=trigger_source(scheduled),
    )


def workflow_error(error: dict[str, str] | None) -> WorkflowError | None:
    if not error:
        return None
    return WorkflowError(str(error.get("name", "Error")), str(error.get("message", "")))


def step(record: StepRecord) -> DoStep | SleepStep | WaitStep:
    config = record.config
    if record.type == "sleep":
        until = config.get("until")
        end = record.end or (_time(until) if isinstance(until, int) else None)
        return SleepStep(
            name=record.name,
            start=record.start,
            end=end,
            finished=record.end is not None,
            error=workflow_error(record.error),
        )
    if record.type == "waitForEvent":
        timeout = config.get("timeout")
        end = record.end
        if end is None and record.start is not None and isinstance(timeout, int | float):
            end = record.start + datetime.timedelta(milliseconds=timeout)
        return WaitStep(
            name=record.name,
            start=record.start,
            end=end,
            finished=record.success is not None,
            error=workflow_error(record.error),
            event_type=config.get("type"),
            output=record.output,
        )
    retries = config.get("retries", {})
    return DoStep(
        name=record.name,
        start=record.start,
        end=record.end,
        success=record.success,
        output=record.output,
        config=StepConfig(
            retries=Retries(
                limit=int(retries.get("limit", 0)), delay=retries.get("delay", 0), backoff=retries.get("backoff")
            ),
            timeout=config.get("timeout", 0),
        ),
        attempts=[
            Attempt(start=a.start, end=a.end, success=a.success, error=workflow_error(a.error)) for a in record.attempts
        ],
    )


def instance_detail(
    s: InstanceStatus, *, simple: bool, descending: bool, scheduled_ms: int | None, cron: str | None
) -> InstanceDetail:
    steps = [] if simple else [step(r) for r in s.steps]
    if descending:
        steps.reverse()
    schedule: InstanceSchedule | UnsetType = UNSET
    if scheduled_ms is not None:
        schedule = InstanceSchedule(cron=cron or "", scheduled_time=scheduled_ms)
    return InstanceDetail(
        status=s.status,  # type: ignore[arg-type]
        params=s.params,
        output=s.output,
        error=workflow_error(s.error),
        queued=s.queued,
        start=s.start,
        end=s.end,
        success=s.success if s.status in FINISHED else None,
        trigger=Trigger(trigger_source(scheduled_ms is not None)),
        version_id=s.version_id,
        step_count=len(s.steps),
        steps=steps,
        schedule=schedule,
    )


def retention_value(value: int | str | UnsetType, what: str) -> int | str | None:
    """A retention as given (ms, or a duration text), None when left out."""
    if value is UNSET:
        return None
    if isinstance(value, bool) or (isinstance(value, int) and value < 0):
        raise InvalidStepConfig(f"{what} is {value!r}; give milliseconds (>= 0) or a duration such as '5 minutes'")
    return value
