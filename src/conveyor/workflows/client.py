"""The client's side of workflows: :class:`Workflow` (``cv.workflow(name)``) and :class:`Instance`.

>>> wf = cv.workflow("download-package")
>>> inst = wf.create(params={"name": "jquery"})
>>> inst.status().status
'queued'
>>> inst.send_event("file-compressed", {"path": "a.js.br"})
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from conveyor import tracing
from conveyor.errors import ConveyorError, InvalidRequest
from conveyor.tracing import check_traceparent
from conveyor.workflows.databases import open_store
from conveyor.workflows.errors import (
    InstanceNotFound,
    InvalidInstanceId,
    InvalidStepConfig,
    InvalidWorkflowName,
    WorkflowNotFound,
    WorkflowVersionNotFound,
)
from conveyor.workflows.execution import queue_name, send_wake, wake_message
from conveyor.workflows.model import (
    MAX_BATCH,
    STATUSES,
    Attempt,
    InstancePage,
    InstanceRow,
    InstanceStatus,
    InstanceSummary,
    NewInstance,
    StepRecord,
    StepRow,
    WorkflowRecord,
    WorkflowVersion,
    _time,
)
from conveyor.workflows.runtime import encode_json
from conveyor.workflows.store import WorkflowStore

if TYPE_CHECKING:
    from conveyor.client.sync import Conveyor

COMPONENT = "workflows"
WORKFLOW_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}\Z")
INSTANCE_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,99}\Z")
RESERVED_ID = re.compile(r"^cf_[0-9a-f]{64}\Z")
RESTART_TYPES = {"do": "step", "sleep": "sleep", "waitForEvent": "waitForEvent"}


def check_workflow_name(name: object) -> str:
    if not isinstance(name, str) or not WORKFLOW_NAME.match(name):
        raise InvalidWorkflowName(
            f"invalid workflow name {name!r}: use 1 to 64 letters, digits, '_' and '-', not starting with '-'"
        )
    return name


def check_instance_id(instance_id: object) -> str:
    if not isinstance(instance_id, str) or not INSTANCE_ID.match(instance_id):
        raise InvalidInstanceId(
            f"invalid instance id {instance_id!r}: use 1 to 100 letters, digits, '_' and '-', not starting with '-'"
        )
    if RESERVED_ID.match(instance_id):
        raise InvalidInstanceId(f"instance id {instance_id!r} is reserved: 'cf_' + 64 hex characters")
    return instance_id


def workflow_store(client: Conveyor) -> WorkflowStore:
    return client.component(COMPONENT, open_store)


@dataclasses.dataclass(frozen=True)
class BatchError:
    index: int
    id: str | None
    code: int
    message: str
    error: ConveyorError = dataclasses.field(repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class BatchResult:
    """What ``create_batch`` made: ``created`` instances and per-item ``errors``."""

    created: list[Instance]
    errors: list[BatchError]


class Workflow:
    """A handle on one workflow of the client's account."""

    def __init__(self, client: Conveyor, record: WorkflowRecord, store: WorkflowStore | None = None) -> None:
        self._client = client
        # A server's routes pass the store it shares among its accounts; a client opens its own.
        self._store = store if store is not None else workflow_store(client)
        self.record = record
        self.name = record.name
        self._account = record.account
        self._internal_queue: str | None = None

    def __repr__(self) -> str:
        return f"<Workflow {self.name}>"

    @classmethod
    def open(cls, client: Conveyor, name: str, store: WorkflowStore | None = None) -> Workflow:
        check_workflow_name(name)
        store = store if store is not None else workflow_store(client)
        record = store.get_workflow(client.deployment.account, name)
        if record is None:
            raise WorkflowNotFound(
                f"there is no workflow {name!r}: a worker registers it when it starts, or put_workflow makes its record"
            )
        return cls(client, record, store)

    def reload(self) -> Workflow:
        """A handle on the workflow as it is stored now (its record read again)."""
        return Workflow.open(self._client, self.name, self._store)

    def delete(self) -> None:
        """Delete the workflow's record, its versions and every instance (their ids stay taken); a
        worker that runs its code registers it again when it starts."""
        if not self._store.delete_workflow(self._account, self.name):
            raise WorkflowNotFound(f"there is no workflow {self.name!r}")

    def versions(self) -> list[WorkflowVersion]:
        """Every version the workflow had (a hash of its code and settings), the one in force first."""
        return self._store.list_versions(self._account, self.name)

    def version(self, version_id: str) -> WorkflowVersion:
        """The version ``version_id``; ``WorkflowVersionNotFound`` if the workflow never had it."""
        if not isinstance(version_id, str) or not 1 <= len(version_id) <= 100:
            raise WorkflowVersionNotFound(f"workflow {self.name!r} has no version {version_id!r}")
        found = self._store.get_version(self._account, self.name, version_id)
        if found is None:
            raise WorkflowVersionNotFound(f"workflow {self.name!r} has no version {version_id!r}")
        return found

    def instance_counts(
        self, *, date_start: datetime.datetime | None = None, date_end: datetime.datetime | None = None
    ) -> dict[str, int]:
        """How many instances are in each status (every status, 0 included), of those created
        between ``date_start`` and ``date_end`` when given."""
        counts = self._store.instance_counts(self._account, self.name, start_ms=_ms(date_start), end_ms=_ms(date_end))
        return {status: counts.get(status, 0) for status in STATUSES}

    def has_worker(self) -> bool:
        """Whether a live worker runs this workflow; without one its instances stay ``queued``."""
        internal = queue_name(self.name)
        return any(run.queue_name == internal for w in self._client.engine.list_workers() for run in w.runs)

    def _queue_id(self) -> str:
        if self._internal_queue is None:
            self._internal_queue = self._store.internal_queue(self._account, self.name, self._client.engine)
        return self._internal_queue

    def create(self, params: Any = None, id: str | None = None, *, traceparent: str | None = None) -> Instance:
        """A new ``queued`` instance with ``params`` (JSON, at most 1 MiB) and ``id`` (unique in
        this workflow and never reused; a random one if None); a worker runs it.

        Its trace is ``traceparent`` (a W3C one), else the creating context's (an OpenTelemetry
        span, a workflow step, a handler of a traced message), else a new one; it records its
        origin (the instance and step, or the message, it was created in)."""
        result = self._create([{"params": params, "id": id}], traceparent)
        if result.errors:
            raise result.errors[0].error
        return result.created[0]

    def create_batch(
        self, items: Sequence[Mapping[str, Any]], *, traceparent: str | None = None, all_or_none: bool = False
    ) -> BatchResult:
        """Create up to 100 instances from ``{"params": ..., "id": ...}`` items (either key may be
        left out); an item that is refused (a taken id, a bad id, oversized params) is reported in
        ``errors`` with its index and code, and the others are created. The trace is chosen as
        :meth:`create`'s, one for the whole batch. ``all_or_none``: the first refusal is raised
        instead, and none is created (the REST API's batch)."""
        if not isinstance(items, Sequence) or isinstance(items, str | bytes):
            raise InvalidRequest("create_batch takes a list of {'params': ..., 'id': ...} items")
        if len(items) > MAX_BATCH:
            raise InvalidRequest(f"create_batch got {len(items)} instances; the limit is {MAX_BATCH}")
        return self._create(items, traceparent, all_or_none)

    def _create(
        self, items: Sequence[Mapping[str, Any]], traceparent: str | None, all_or_none: bool = False
    ) -> BatchResult:
        if traceparent is not None:
            check_traceparent(traceparent)
        ctx = tracing.current()
        chosen = traceparent or tracing.current_traceparent() or tracing.make(tracing.new_trace_id())
        origin = _origin(ctx)
        errors: list[BatchError] = []
        news: list[tuple[int, NewInstance]] = []
        taken: set[str] = set()
        for index, item in enumerate(items):
            given = item.get("id") if isinstance(item, Mapping) else None
            try:
                if not isinstance(item, Mapping) or set(item) - {"params", "id"}:
                    raise InvalidRequest(f"item {index} must be a mapping of 'params' and 'id' only")
                instance_id = str(uuid.uuid4()) if given is None else check_instance_id(given)
                if instance_id in taken:
                    raise InvalidInstanceId(f"instance id {instance_id!r} is given twice in this batch")
                params = encode_json(item.get("params"), "params")
                news.append((index, NewInstance(instance_id, params, chosen[3:35], chosen, origin)))
                taken.add(instance_id)
            except ConveyorError as exc:
                errors.append(_batch_error(index, given, exc))
        if all_or_none and errors:
            raise errors[0].error
        now = self._client.engine.clock.now_ms()
        rows = self._store.create_instances(
            self._account, self.name, self.record.version_id, [n for _, n in news], now, all_or_none
        )
        created: list[Instance] = []
        for (index, new), row in zip(news, rows, strict=True):
            if isinstance(row, ConveyorError):
                errors.append(_batch_error(index, new.id, row))
            else:
                created.append(Instance(self, row.id))
        if created:
            self._client.engine.enqueue(self._queue_id(), [wake_message(i.id, None, now) for i in created])
        errors.sort(key=lambda e: e.index)
        return BatchResult(created, errors)

    def get(self, id: str) -> Instance:
        """The instance ``id``; ``InstanceNotFound`` if this workflow has none."""
        check_instance_id(id)
        if self._store.get_instance(self._account, self.name, id) is None:
            raise InstanceNotFound(f"workflow {self.name!r} has no instance {id!r}")
        return Instance(self, id)

    def list_instances(
        self,
        status: str | None = None,
        *,
        date_start: datetime.datetime | None = None,
        date_end: datetime.datetime | None = None,
        cursor: str | None = None,
        per_page: int = 50,
        direction: str = "asc",
    ) -> InstancePage:
        """A page of instances by creation time (``direction`` asc or desc), filtered by ``status``
        and creation dates; pass the page's ``cursor`` for the next (None after the last)."""
        if status is not None and status not in STATUSES:
            raise InvalidRequest(f"status {status!r} is not one of {', '.join(STATUSES)}")
        if direction not in ("asc", "desc"):
            raise InvalidRequest(f"direction is {direction!r}; use asc or desc")
        if isinstance(per_page, bool) or not isinstance(per_page, int) or not 1 <= per_page <= 100:
            raise InvalidRequest(f"per_page is {per_page!r}; it must be a whole number from 1 to 100")
        rows = self._store.list_instances(
            self._account,
            self.name,
            status=status,
            start_ms=_ms(date_start),
            end_ms=_ms(date_end),
            after=_decode_cursor(cursor),
            limit=per_page + 1,
            descending=direction == "desc",
        )
        page, more = rows[:per_page], len(rows) > per_page
        next_cursor = _encode_cursor(page[-1]) if more else None
        return InstancePage([_summary(r) for r in page], next_cursor)


class Instance:
    """A handle on one instance."""

    def __init__(self, workflow: Workflow, id: str) -> None:
        self.workflow = workflow
        self.id = id
        self._store = workflow._store
        self._account = workflow._account

    def __repr__(self) -> str:
        return f"<Instance {self.workflow.name}/{self.id}>"

    def _row(self) -> InstanceRow:
        row = self._store.get_instance(self._account, self.workflow.name, self.id)
        if row is None:
            raise InstanceNotFound(f"workflow {self.workflow.name!r} has no instance {self.id!r}")
        return row

    def _now(self) -> int:
        return self.workflow._client.engine.clock.now_ms()

    def status(self) -> InstanceStatus:
        """The instance now, with every step (attempts, times, outputs, configs)."""
        row = self._row()
        steps = self._store.steps(self._account, self.workflow.name, self.id)
        return InstanceStatus(
            id=row.id,
            workflow=row.workflow,
            status=row.status,
            output=None if row.output is None else json.loads(row.output),
            error=None if row.error is None else json.loads(row.error),
            steps=[_step_record(s) for s in steps],
            params=json.loads(row.params),
            queued=_time(row.created_ms),
            start=_time(row.started_ms),
            end=_time(row.ended_ms),
            version_id=row.version_id,
            trace_id=row.trace_id,
        )

    def pause(self) -> None:
        """Pause: at once when it sleeps, waits or is queued; a running one goes to
        ``waitingForPause`` and is ``paused`` when its current step ends."""
        self._store.change_status(self._account, self.workflow.name, self.id, "pause", self._now())

    def resume(self) -> None:
        """Resume a paused instance (its timers shifted by the time it was paused);
        ``InvalidInstanceState`` if it is not paused."""
        row = self._store.change_status(self._account, self.workflow.name, self.id, "resume", self._now())
        if row.status == "running":
            return
        self._wake(row.wake_at_ms)
        if row.waiting_for is not None:
            self._wake(None)  # its event may have come while it was paused

    def terminate(self) -> None:
        """End the instance ``terminated`` (a running step's result is not recorded);
        ``InvalidInstanceState`` if it has finished."""
        self._store.change_status(self._account, self.workflow.name, self.id, "terminate", self._now())

    def restart(self, from_step: str | Mapping[str, Any] | None = None) -> None:
        """Run again from the start, or from ``from_step`` (a ``step.do`` name, or
        ``{"name", "count" (default 1), "type": "do" | "sleep" | "waitForEvent"}``), keeping the
        results of the steps before it."""
        key = None if from_step is None else _step_key(from_step)
        self._store.change_status(self._account, self.workflow.name, self.id, "restart", self._now(), key)
        self._wake(None)

    def send_event(self, type: str, payload: Any = None) -> None:
        """Send an event: the instance's next ``wait_for_event`` of ``type`` gets it (events wait,
        in order, until a wait takes them); wakes the instance if it waits for it now."""
        if not isinstance(type, str) or not type or len(type) > 100:
            raise InvalidRequest(f"event type {type!r} is invalid: use 1 to 100 characters")
        text = encode_json(payload, "the event payload")
        row = self._store.add_event(self._account, self.workflow.name, self.id, type, text, self._now())
        if row.status == "waiting" and row.waiting_for == type:
            self._wake(None)

    def delete(self) -> None:
        """Delete the instance and its steps and events; its id is never given again."""
        if not self._store.delete_instance(self._account, self.workflow.name, self.id):
            raise InstanceNotFound(f"workflow {self.workflow.name!r} has no instance {self.id!r}")

    def _wake(self, wake_at_ms: int | None) -> None:
        client = self.workflow._client
        send_wake(client.engine, self.workflow._queue_id(), self.id, wake_at_ms)


def _origin(ctx: tracing.TraceContext | None) -> str | None:
    """What is creating instances now, as an instance's ``origin`` (JSON text), or None."""
    if ctx is None:
        return None
    if ctx.instance is not None:
        found = {"workflow": ctx.workflow, "instance": ctx.instance}
        return json.dumps(found if ctx.step is None else {**found, "step": ctx.step})
    if ctx.message is not None:
        return json.dumps({"queue": ctx.queue, "message": ctx.message})
    return None


def _step_key(from_step: str | Mapping[str, Any]) -> str:
    spec: Mapping[str, Any] = {"name": from_step} if isinstance(from_step, str) else from_step
    if not isinstance(spec, Mapping) or set(spec) - {"name", "count", "type"} or "name" not in spec:
        raise InvalidStepConfig(f"from_step is {from_step!r}; give a step name or {{'name', 'count', 'type'}}")
    kind = spec.get("type", "do")
    if kind not in RESTART_TYPES:
        raise InvalidStepConfig(f"from_step type is {kind!r}; use do, sleep or waitForEvent")
    count = spec.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InvalidStepConfig(f"from_step count is {count!r}; it must be a whole number >= 1")
    return f"{RESTART_TYPES[kind]}:{spec['name']}:{count}"


def _batch_error(index: int, instance_id: Any, exc: ConveyorError) -> BatchError:
    return BatchError(index, instance_id if isinstance(instance_id, str) else None, exc.code, exc.message, exc)


def _ms(when: datetime.datetime | None) -> int | None:
    if when is None:
        return None
    if when.tzinfo is None:
        raise InvalidRequest(f"date {when!r} has no time zone; give an aware datetime (datetime.UTC)")
    return int(when.timestamp() * 1000)


def _encode_cursor(row: InstanceRow) -> str:
    return base64.urlsafe_b64encode(json.dumps([row.created_ms, row.id]).encode()).decode()


def _decode_cursor(cursor: str | None) -> tuple[int, str] | None:
    if cursor is None:
        return None
    try:
        created, instance_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if isinstance(created, int) and isinstance(instance_id, str):
            return created, instance_id
    except (ValueError, TypeError):
        pass
    raise InvalidRequest(f"cursor {cursor!r} is not one this server gave")


def _summary(row: InstanceRow) -> InstanceSummary:
    return InstanceSummary(
        row.id,
        row.status,
        _time(row.created_ms),
        _time(row.modified_ms),
        _time(row.started_ms),
        _time(row.ended_ms),
        row.version_id,
    )


def _step_record(step: StepRow) -> StepRecord:
    n = step.key.rsplit(":", 1)[1]
    attempts = json.loads(step.attempts)
    finished = step.status in ("complete", "errored")
    success = None if not finished else step.status == "complete"
    error = attempts[-1].get("error") if attempts and step.status == "errored" else None
    config = json.loads(step.config)
    if step.type == "step":
        shown = [
            Attempt(_time(a.get("start")), _time(a.get("end")), a.get("success"), a.get("error")) for a in attempts
        ]
    else:
        shown = []
    return StepRecord(
        name=f"{step.name}-{n}",
        type=step.type,
        start=_time(step.start_ms),
        end=_time(step.end_ms),
        success=success,
        output=None if step.output is None else json.loads(step.output),
        config={k: v for k, v in config.items() if k != "deadline"},
        attempts=shown,
        error=error,
    )
