"""The server's end of the workflow store over HTTP (:mod:`conveyor.workflows.remote`):
``POST /conveyor/v1/accounts/{account_id}/workflow-store/{method}``, one route per method of
:data:`~conveyor.workflows.remote.METHODS`, each calling the deployment's store for the path's
account.

A remote worker's calls are checked here as the Python API checks its own callers' (names, ids,
the 1 MiB limits of params, outputs and events, a settings record within its ranges), so a
token can write nothing into its account that ``cv.workflow(...)`` would have refused. The whole
account is reached (a queue-scoped token may not call these); the reading methods are open to
read-only tokens.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from conveyor import limits
from conveyor.errors import InvalidRequest
from conveyor.server.access import Access, DeclaredRoute, Scope, declared
from conveyor.server.envelope import ok, read_body
from conveyor.server.service import blocking, context
from conveyor.tracing import check_traceparent
from conveyor.workflows.client import COMPONENT, check_instance_id, check_workflow_name
from conveyor.workflows.counter import check_add, check_counter_name, check_event_type
from conveyor.workflows.databases import open_served_store
from conveyor.workflows.errors import InvalidStepConfig, PayloadTooLarge
from conveyor.workflows.model import (
    MAX_BATCH,
    MAX_PAYLOAD_BYTES,
    NewInstance,
    StepRow,
    WorkflowSettings,
)
from conveyor.workflows.records import check_overrides
from conveyor.workflows.remote import MAX_REQUEST_BYTES, METHODS, PATH, decode_arguments, to_wire

TRACE_ID = re.compile(r"^[0-9a-f]{32}\Z")
# An origin names a workflow, an instance and a step, or a queue and a message.
MAX_ORIGIN_CHARS = 1000


def _json_text(text: str | None, what: str) -> None:
    if text is None:
        return
    size = len(text.encode())
    if size > MAX_PAYLOAD_BYTES:
        raise PayloadTooLarge(f"{what} is {size} bytes of JSON; the limit is {MAX_PAYLOAD_BYTES} (1 MiB)")
    try:
        json.loads(text)
    except ValueError:
        raise InvalidRequest(f"{what} is not JSON text") from None


def _settings(settings: WorkflowSettings) -> None:
    if not 1 <= settings.max_steps <= 1_000_000:
        raise InvalidStepConfig(f"max_steps is {settings.max_steps}; it must be from 1 to 1000000")
    if settings.concurrency is not None and not 1 <= settings.concurrency <= limits.MAX_CONCURRENCY:
        raise InvalidStepConfig(f"concurrency is {settings.concurrency}; it must be from 1 to {limits.MAX_CONCURRENCY}")
    for what, value in (("success", settings.success_retention_ms), ("error", settings.error_retention_ms)):
        if not 0 <= value <= 10 * 365 * 86_400_000:
            raise InvalidStepConfig(f"the {what} retention is {value} ms; it must be from 0 to 10 years")
    if len(settings.script_name) > 1000 or len(settings.schedules) > 100:
        raise InvalidStepConfig("the workflow's script name or schedules are longer than a definition makes")


def _items(items: list[NewInstance]) -> None:
    if len(items) > MAX_BATCH:
        raise InvalidRequest(f"create_instances got {len(items)} instances; the limit is {MAX_BATCH}")
    for index, item in enumerate(items):
        check_instance_id(item.id)
        _json_text(item.params, f"the params of item {index}")
        if not TRACE_ID.match(item.trace_id):
            raise InvalidRequest(f"the trace id of item {index} must be 32 lowercase hex characters")
        if item.traceparent is not None:
            check_traceparent(item.traceparent, f"the traceparent of item {index}")
            if item.traceparent[3:35] != item.trace_id:
                raise InvalidRequest(f"the traceparent of item {index} is not of its trace id {item.trace_id}")
        if item.origin is not None:
            if len(item.origin) > MAX_ORIGIN_CHARS:
                raise InvalidRequest(f"the origin of item {index} is over {MAX_ORIGIN_CHARS} characters")
            _json_text(item.origin, f"the origin of item {index}")


def _step(step: StepRow) -> None:
    _json_text(step.output, f"the output of step {step.name!r}")


def check_arguments(method: str, arguments: dict[str, Any]) -> None:
    """Refuse what the Python API would not have written (every check names the value)."""
    for key in ("workflow", "name"):
        if key in arguments:
            check_workflow_name(arguments[key])
    if "instance_id" in arguments:
        check_instance_id(arguments["instance_id"])
    if "trace_id" in arguments and not TRACE_ID.match(arguments["trace_id"]):
        raise InvalidRequest(f"trace id {arguments['trace_id']!r} must be 32 lowercase hex characters")
    if "settings" in arguments:
        _settings(arguments["settings"])
    if "overrides" in arguments:
        check_overrides(arguments["overrides"])
    if "version_id" in arguments and len(arguments["version_id"]) > 100:
        raise InvalidRequest(f"version id {arguments['version_id'][:100]!r}... is longer than 100 characters")
    if "items" in arguments:
        _items(arguments["items"])
    if "step" in arguments:
        _step(arguments["step"])
    if method == "add_event":
        if not 1 <= len(arguments["type"]) <= 100:
            raise InvalidRequest(f"event type {arguments['type']!r} is invalid: use 1 to 100 characters")
        _json_text(arguments["payload"], "the event payload")
    if method == "finish":
        if arguments["status"] not in ("complete", "errored"):
            raise InvalidRequest(f"an instance finishes complete or errored, not {arguments['status']!r}")
        _json_text(arguments["output"], "the workflow's output")
        _json_text(arguments["error"], "the workflow's error")
    if "counter" in arguments:
        check_counter_name(arguments["counter"])
    if method == "counter_add":
        check_add(arguments["n"], arguments["key"])
    if "event_type" in arguments:
        check_event_type(arguments["event_type"])
    if "seqs" in arguments and len(arguments["seqs"]) > 1000:
        raise InvalidRequest(f"wakeups_sent got {len(arguments['seqs'])} wake-ups; the limit is 1000")
    if "limit" in arguments and not 1 <= arguments["limit"] <= 1000:
        raise InvalidRequest(f"limit is {arguments['limit']}; it must be from 1 to 1000")


def _endpoint(method: str) -> Callable[[Request], Any]:
    async def call(request: Request) -> Response:
        ctx = context(request)
        arguments = decode_arguments(method, await read_body(request, MAX_REQUEST_BYTES))
        check_arguments(method, arguments)

        def run() -> Any:
            store = ctx.service.store(COMPONENT, open_served_store)
            if method == "internal_queue":
                return store.internal_queue(ctx.account_id, arguments["workflow"], ctx.client.engine)
            return getattr(store, method)(ctx.account_id, **arguments)

        return ok(to_wire(await blocking(run)))

    call.__name__ = f"workflow_store_{method}"
    return call


def _route(method: str, read_only: bool) -> DeclaredRoute:
    path = PATH.replace("{method}", method)
    return declared(path, _endpoint(method), "POST", Access(Scope.ACCOUNT, read_only=read_only))


ROUTES = [_route(method, read_only) for method, read_only in METHODS.items()]
