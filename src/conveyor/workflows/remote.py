"""The workflow store over HTTP, for workers and clients of ``connect("http://...")``: both ends'
half of one narrow protocol, and :class:`HttpWorkflowStore`, the client's.

Each call is ``POST /conveyor/v1/accounts/{account_id}/workflow-store/{method}`` with the
method's arguments (all but the account, which is the path's and so the token's) as one JSON
object, answered ``{"result": ...}`` in the server's envelope, or a refusal naming its error class
(``conveyor-error``) as every route's is. Only the methods in :data:`METHODS` exist: the ones a
worker's runs and a client's handles make on their own account. The deployment-wide maintenance
(retention, rescue, cron) runs on the server's coordinator, never from a remote process.

Values are the store's plain data (:mod:`conveyor.workflows.model`) turned into JSON by the
method's own type hints, both ways (:func:`to_wire`, :func:`from_wire`): a dataclass is an object
of its fields (every one required, no other accepted), a tuple an array, a per-item refusal in a
result (``create_instances``) ``{"conveyor-error": class name, "message": ...}``. What comes in
does not parse, or does not fit the hints: :class:`~conveyor.errors.InvalidRequest` naming where.

>>> cv = conveyor.connect("http://127.0.0.1:8787", token=secret, account_id="acc1")
>>> cv.workflow("download-package").create({"name": "jquery"})     # through this store
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin
from urllib.parse import quote

import httpx
import msgspec

from conveyor import errors as errors_module
from conveyor import wire
from conveyor.client.http import error_from
from conveyor.deployment import Deployment
from conveyor.errors import ConveyorError, InvalidRequest, StorageError
from conveyor.workflows import errors as workflow_errors
from conveyor.workflows.model import (
    Claim,
    CounterChange,
    EventRow,
    InstanceRow,
    NewInstance,
    ScheduleRow,
    StepRow,
    Wakeup,
    WorkflowOverrides,
    WorkflowRecord,
    WorkflowSettings,
    WorkflowVersion,
)
from conveyor.workflows.store import Action, SuspendOutcome, WorkflowStore

if typing.TYPE_CHECKING:
    from conveyor.engine.base import Engine

PATH = "/conveyor/v1/accounts/{account_id}/workflow-store/{method}"
# The store's methods a remote process may call, and whether each only reads.
METHODS: Mapping[str, bool] = {
    "put_workflow": False,
    "put_workflow_overrides": False,
    "get_workflow": True,
    "list_workflows": True,
    "delete_workflow": False,
    "list_versions": True,
    "get_version": True,
    "instance_counts": True,
    "create_instances": False,
    "get_instance": True,
    "list_instances": True,
    "instances_by_trace": True,
    "steps": True,
    "delete_instance": False,
    "add_event": False,
    "change_status": False,
    "claim": False,
    "save_step": False,
    "take_event": False,
    "suspend": False,
    "finish": False,
    "internal_queue": False,
    "counter_add": False,
    "counter_value": True,
    "counter_notify": False,
    "counter_delete": False,
    "wakeups_sent": False,
}
# A call carries at most one step's output (1 MiB of JSON, escaped inside a JSON string) or a
# batch of 100 instances' params; a claim's answer (every step so far) is not bounded by this.
MAX_REQUEST_BYTES = 8 * 1024 * 1024
ERROR_KEY = "conveyor-error"
TIMEOUT = httpx.Timeout(60.0, connect=10.0)


@functools.cache
def signature(method: str) -> tuple[dict[str, Any], Any]:
    """The parameter types (without ``self`` and ``account``) and the result type of ``method``."""
    if method not in METHODS:
        raise InvalidRequest(f"the workflow store has no method {method!r}")
    hints = typing.get_type_hints(getattr(WorkflowStore, method), vars(_store_module()))
    result = hints.pop("return")
    hints.pop("account", None)
    if method == "internal_queue":
        hints.pop("engine", None)
    return hints, result


def _store_module() -> types.ModuleType:
    import conveyor.workflows.store as store_module

    return store_module


# -- values ↔ JSON ----------------------------------------------------------------------------
def to_wire(value: Any) -> Any:
    """``value`` (the store's plain data) as JSON-ready builtins."""
    if isinstance(value, ConveyorError):
        return {ERROR_KEY: type(value).__name__, "message": value.message}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_wire(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [to_wire(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_wire(v) for k, v in value.items()}
    return value


def from_wire(value: Any, kind: Any, where: str = "value") -> Any:
    """``value`` (parsed JSON) as the type ``kind``; :class:`InvalidRequest` naming ``where`` when
    it does not fit."""
    if kind is Any:
        return value
    if kind is None or kind is type(None):
        if value is not None:
            raise _misfit(where, "null", value)
        return None
    origin = get_origin(kind)
    if origin is Union or origin is types.UnionType:
        return _union(value, get_args(kind), where)
    if origin is Literal:
        if value not in get_args(kind):
            raise InvalidRequest(f"{where} is {value!r}; it must be one of {', '.join(map(repr, get_args(kind)))}")
        return value
    if origin in (list, Sequence):
        (item,) = get_args(kind)
        if not isinstance(value, list):
            raise _misfit(where, "an array", value)
        return [from_wire(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is tuple:
        return _tuple(value, get_args(kind), where)
    if origin is dict:
        if not isinstance(value, dict):
            raise _misfit(where, "an object", value)
        _, item = get_args(kind)
        return {k: from_wire(v, item, f"{where}.{k}") for k, v in value.items()}
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return _dataclass(value, kind, where)
    if kind is bool:
        if not isinstance(value, bool):
            raise _misfit(where, "true or false", value)
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _misfit(where, "a whole number", value)
        return value
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _misfit(where, "a number", value)
        return float(value)
    if kind is str:
        if not isinstance(value, str):
            raise _misfit(where, "a string", value)
        return value
    raise TypeError(f"{where}: the workflow store's protocol has no form for {kind!r}")


def _misfit(where: str, expected: str, value: Any) -> InvalidRequest:
    shown = repr(value)
    return InvalidRequest(f"{where} must be {expected}, not {shown[:80]}")


def _union(value: Any, kinds: tuple[Any, ...], where: str) -> Any:
    if value is None and type(None) in kinds:
        return None
    if isinstance(value, dict) and ERROR_KEY in value and ConveyorError in kinds:
        return _error(value, where)
    last: InvalidRequest | None = None
    for kind in kinds:
        if kind is type(None) or kind is ConveyorError:
            continue
        try:
            return from_wire(value, kind, where)
        except InvalidRequest as exc:
            last = exc
    raise last or _misfit(where, "a value", value)


def _tuple(value: Any, kinds: tuple[Any, ...], where: str) -> tuple[Any, ...]:
    if not isinstance(value, list):
        raise _misfit(where, "an array", value)
    if len(kinds) == 2 and kinds[1] is Ellipsis:
        return tuple(from_wire(v, kinds[0], f"{where}[{i}]") for i, v in enumerate(value))
    if len(value) != len(kinds):
        raise InvalidRequest(f"{where} must be an array of {len(kinds)} values, not {len(value)}")
    return tuple(from_wire(v, k, f"{where}[{i}]") for i, (v, k) in enumerate(zip(value, kinds, strict=True)))


def _dataclass(value: Any, kind: type[Any], where: str) -> Any:
    if not isinstance(value, dict):
        raise _misfit(where, "an object", value)
    hints = _field_types(kind)
    unknown = sorted(set(value) - set(hints))
    if unknown:
        raise InvalidRequest(f"{where} has unknown fields: {', '.join(unknown)}")
    missing = sorted(set(hints) - set(value))
    if missing:
        raise InvalidRequest(f"{where} lacks the fields: {', '.join(missing)}")
    return kind(**{name: from_wire(value[name], hint, f"{where}.{name}") for name, hint in hints.items()})


_FIELD_TYPES: dict[type[Any], dict[str, Any]] = {}


def _field_types(kind: type[Any]) -> dict[str, Any]:
    found = _FIELD_TYPES.get(kind)
    if found is None:
        hints = typing.get_type_hints(kind)
        found = _FIELD_TYPES[kind] = {f.name: hints[f.name] for f in dataclasses.fields(kind)}
    return found


def _error(value: dict[str, Any], where: str) -> ConveyorError:
    name, message = value.get(ERROR_KEY), value.get("message")
    if not isinstance(name, str) or not isinstance(message, str):
        raise InvalidRequest(f"{where} is a refusal without its class name and message")
    named = (getattr(m, name, None) for m in (workflow_errors, errors_module))
    cls = next((c for c in named if isinstance(c, type) and issubclass(c, ConveyorError)), ConveyorError)
    return cls(message)


def decode_arguments(method: str, raw: bytes) -> dict[str, Any]:
    """The arguments of a call to ``method`` from its request body (the server's end)."""
    parameters, _ = signature(method)
    try:
        body = msgspec.json.decode(raw) if raw.strip() else {}
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"the body of {method} is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidRequest(f"the body of {method} must be a JSON object of its arguments")
    unknown = sorted(set(body) - set(parameters))
    if unknown:
        raise InvalidRequest(f"{method} has no arguments {', '.join(unknown)}")
    arguments: dict[str, Any] = {}
    for name, kind in parameters.items():
        if name in body:
            arguments[name] = from_wire(body[name], kind, name)
        elif not _optional(method, name):
            raise InvalidRequest(f"{method} needs the argument {name!r}")
    return arguments


@functools.cache
def _defaults(method: str) -> frozenset[str]:
    import inspect

    params = inspect.signature(getattr(WorkflowStore, method)).parameters.values()
    return frozenset(p.name for p in params if p.default is not inspect.Parameter.empty)


def _optional(method: str, name: str) -> bool:
    return name in _defaults(method)


# -- the client's end -------------------------------------------------------------------------
class HttpWorkflowStore(WorkflowStore):
    """The store of the deployment behind a server, for the account of the client's token.

    Every call is one request; a server that cannot be reached, or answers 5xx, raises
    :class:`~conveyor.errors.StorageError` (a run's handler then fails and its message comes
    back, as when a local store's database is down)."""

    def __init__(self, deployment: Deployment) -> None:
        if not deployment.account:
            raise InvalidRequest("workflows over HTTP need the account_id the client connected with")
        headers = {"authorization": f"Bearer {deployment.token}"} if deployment.token else {}
        self._http = httpx.Client(base_url=deployment.location.rstrip("/"), headers=headers, timeout=TIMEOUT)
        self._account = deployment.account

    def _call(self, account: str, method: str, **arguments: Any) -> Any:
        if account != self._account:
            raise InvalidRequest(f"this client works in account {self._account!r}, not {account!r}")
        path = PATH.format(account_id=quote(account, safe=""), method=method)
        body = msgspec.json.encode({name: to_wire(value) for name, value in arguments.items()})
        try:
            response = self._http.post(path, content=body, headers={"content-type": "application/json"})
        except httpx.TransportError as exc:
            raise StorageError(f"cannot reach the Conveyor server's workflow store: {exc}") from None
        if response.status_code >= 400:
            error = error_from(response, workflow_errors)
            if response.status_code >= 500 and not isinstance(error, StorageError):
                raise StorageError(f"the server's workflow store failed: {error.message}")
            raise error
        answer = wire.decode_answer(response.content, wire.Envelope[Any]).result
        return from_wire(answer, signature(method)[1], f"the answer of {method}")

    # -- workflows ----------------------------------------------------------------------------
    def put_workflow(
        self, account: str, name: str, settings: WorkflowSettings, version_id: str, now_ms: int
    ) -> WorkflowRecord:
        return typing.cast(
            WorkflowRecord,
            self._call(account, "put_workflow", name=name, settings=settings, version_id=version_id, now_ms=now_ms),
        )

    def get_workflow(self, account: str, name: str) -> WorkflowRecord | None:
        return typing.cast(WorkflowRecord | None, self._call(account, "get_workflow", name=name))

    def put_workflow_overrides(
        self, account: str, name: str, overrides: WorkflowOverrides, now_ms: int
    ) -> WorkflowRecord:
        return typing.cast(
            WorkflowRecord, self._call(account, "put_workflow_overrides", name=name, overrides=overrides, now_ms=now_ms)
        )

    def list_workflows(self, account: str) -> list[WorkflowRecord]:
        return typing.cast(list[WorkflowRecord], self._call(account, "list_workflows"))

    def delete_workflow(self, account: str, name: str) -> bool:
        return bool(self._call(account, "delete_workflow", name=name))

    def list_versions(self, account: str, workflow: str) -> list[WorkflowVersion]:
        return typing.cast(list[WorkflowVersion], self._call(account, "list_versions", workflow=workflow))

    def get_version(self, account: str, workflow: str, version_id: str) -> WorkflowVersion | None:
        return typing.cast(
            WorkflowVersion | None, self._call(account, "get_version", workflow=workflow, version_id=version_id)
        )

    def instance_counts(
        self, account: str, workflow: str, *, start_ms: int | None = None, end_ms: int | None = None
    ) -> dict[str, int]:
        return typing.cast(
            dict[str, int],
            self._call(account, "instance_counts", workflow=workflow, start_ms=start_ms, end_ms=end_ms),
        )

    # -- instances ----------------------------------------------------------------------------
    def create_instances(
        self,
        account: str,
        workflow: str,
        version_id: str,
        items: Sequence[NewInstance],
        now_ms: int,
        atomic: bool = False,
    ) -> list[InstanceRow | ConveyorError]:
        return typing.cast(
            list[InstanceRow | ConveyorError],
            self._call(
                account,
                "create_instances",
                workflow=workflow,
                version_id=version_id,
                items=items,
                now_ms=now_ms,
                atomic=atomic,
            ),
        )

    def get_instance(self, account: str, workflow: str, instance_id: str) -> InstanceRow | None:
        return typing.cast(
            InstanceRow | None, self._call(account, "get_instance", workflow=workflow, instance_id=instance_id)
        )

    def list_instances(
        self,
        account: str,
        workflow: str,
        *,
        status: str | None,
        start_ms: int | None,
        end_ms: int | None,
        after: tuple[int, str] | None,
        limit: int,
        descending: bool,
    ) -> list[InstanceRow]:
        return typing.cast(
            list[InstanceRow],
            self._call(
                account,
                "list_instances",
                workflow=workflow,
                status=status,
                start_ms=start_ms,
                end_ms=end_ms,
                after=after,
                limit=limit,
                descending=descending,
            ),
        )

    def instances_by_trace(self, account: str, trace_id: str, limit: int) -> list[InstanceRow]:
        return typing.cast(list[InstanceRow], self._call(account, "instances_by_trace", trace_id=trace_id, limit=limit))

    def steps(self, account: str, workflow: str, instance_id: str) -> list[StepRow]:
        return typing.cast(list[StepRow], self._call(account, "steps", workflow=workflow, instance_id=instance_id))

    def delete_instance(self, account: str, workflow: str, instance_id: str) -> bool:
        return bool(self._call(account, "delete_instance", workflow=workflow, instance_id=instance_id))

    def add_event(
        self, account: str, workflow: str, instance_id: str, type: str, payload: str, now_ms: int
    ) -> InstanceRow:
        return typing.cast(
            InstanceRow,
            self._call(
                account,
                "add_event",
                workflow=workflow,
                instance_id=instance_id,
                type=type,
                payload=payload,
                now_ms=now_ms,
            ),
        )

    def change_status(
        self, account: str, workflow: str, instance_id: str, action: Action, now_ms: int, from_step: str | None = None
    ) -> InstanceRow:
        return typing.cast(
            InstanceRow,
            self._call(
                account,
                "change_status",
                workflow=workflow,
                instance_id=instance_id,
                action=action,
                now_ms=now_ms,
                from_step=from_step,
            ),
        )

    # -- runs ---------------------------------------------------------------------------------
    def claim(self, account: str, workflow: str, instance_id: str, message_id: str, now_ms: int) -> Claim | None:
        return typing.cast(
            Claim | None,
            self._call(
                account, "claim", workflow=workflow, instance_id=instance_id, message_id=message_id, now_ms=now_ms
            ),
        )

    def save_step(
        self,
        account: str,
        workflow: str,
        instance_id: str,
        epoch: int,
        step: StepRow,
        *,
        run_token: str | None,
        durable: bool = True,
    ) -> str | None:
        return typing.cast(
            str | None,
            self._call(
                account,
                "save_step",
                workflow=workflow,
                instance_id=instance_id,
                epoch=epoch,
                step=step,
                run_token=run_token,
                durable=durable,
            ),
        )

    def take_event(
        self,
        account: str,
        workflow: str,
        instance_id: str,
        epoch: int,
        step: StepRow,
        type: str,
        *,
        run_token: str | None,
    ) -> tuple[bool, EventRow | None]:
        return typing.cast(
            tuple[bool, EventRow | None],
            self._call(
                account,
                "take_event",
                workflow=workflow,
                instance_id=instance_id,
                epoch=epoch,
                step=step,
                type=type,
                run_token=run_token,
            ),
        )

    def suspend(
        self,
        account: str,
        workflow: str,
        instance_id: str,
        epoch: int,
        wake_at_ms: int,
        waiting_for: str | None,
        now_ms: int,
        *,
        run_token: str | None,
    ) -> SuspendOutcome | None:
        return typing.cast(
            SuspendOutcome | None,
            self._call(
                account,
                "suspend",
                workflow=workflow,
                instance_id=instance_id,
                epoch=epoch,
                wake_at_ms=wake_at_ms,
                waiting_for=waiting_for,
                now_ms=now_ms,
                run_token=run_token,
            ),
        )

    def finish(
        self,
        account: str,
        workflow: str,
        instance_id: str,
        epoch: int,
        status: str,
        output: str | None,
        error: str | None,
        now_ms: int,
        *,
        run_token: str | None,
    ) -> bool:
        return bool(
            self._call(
                account,
                "finish",
                workflow=workflow,
                instance_id=instance_id,
                epoch=epoch,
                status=status,
                output=output,
                error=error,
                now_ms=now_ms,
                run_token=run_token,
            )
        )

    # -- counters -----------------------------------------------------------------------------
    def counter_add(self, account: str, counter: str, n: int, key: str | None, now_ms: int) -> CounterChange:
        return typing.cast(
            CounterChange, self._call(account, "counter_add", counter=counter, n=n, key=key, now_ms=now_ms)
        )

    def counter_value(self, account: str, counter: str) -> int:
        return int(self._call(account, "counter_value", counter=counter))

    def counter_notify(
        self, account: str, counter: str, workflow: str, instance_id: str, event_type: str, now_ms: int
    ) -> CounterChange:
        return typing.cast(
            CounterChange,
            self._call(
                account,
                "counter_notify",
                counter=counter,
                workflow=workflow,
                instance_id=instance_id,
                event_type=event_type,
                now_ms=now_ms,
            ),
        )

    def counter_delete(self, account: str, counter: str) -> bool:
        return bool(self._call(account, "counter_delete", counter=counter))

    def wakeups_sent(self, account: str, seqs: list[int]) -> None:
        if seqs:
            self._call(account, "wakeups_sent", seqs=seqs)

    def internal_queue(self, account: str, workflow: str, engine: Engine) -> str:
        """The server makes the queue: a tenant cannot name one with ``~`` itself."""
        return str(self._call(account, "internal_queue", workflow=workflow))

    # -- maintenance: the server's coordinator does it, never a remote process ----------------
    def prune(self, now_ms: int) -> int:
        raise InvalidRequest("workflow retention runs on the server's coordinator, not over HTTP")

    def overdue(self, before_ms: int, limit: int) -> list[InstanceRow]:
        raise InvalidRequest("the workflow rescue runs on the server's coordinator, not over HTTP")

    def requeue_orphan(self, account: str, workflow: str, instance_id: str, epoch: int, now_ms: int) -> bool:
        raise InvalidRequest("the workflow rescue runs on the server's coordinator, not over HTTP")

    def owed_wakeups(self, before_ms: int, limit: int) -> list[Wakeup]:
        raise InvalidRequest("owed wake-ups are sent by the server's coordinator, not over HTTP")

    def schedules(self) -> list[ScheduleRow]:
        raise InvalidRequest("cron triggers run on the server's coordinator, not over HTTP")

    def start_tick(
        self, account: str, workflow: str, tick_ms: int, instance: NewInstance, now_ms: int
    ) -> InstanceRow | None:
        raise InvalidRequest("cron triggers run on the server's coordinator, not over HTTP")

    def sync(self) -> None:
        pass  # every write over HTTP is durable when its answer comes (syncs_later is False)

    def close(self) -> None:
        self._http.close()
