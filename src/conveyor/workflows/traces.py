"""The whole tree of one run, from what the engine stored: ``conveyor trace ID``.

The store finds the trace's instances by trace id; each instance's steps come with their attempts,
and each attempt with the messages it sent; an instance's ``origin`` puts it under the step that
created it, or under the message whose handler did. An instance whose creator is not in the trace
(a client, a producer outside any run, or a creator since pruned) is a root. So a partial
success shows where it stopped: the errored step, its failed attempts and their errors, the
children that did not finish.

>>> tree = trace_tree(cv, "4bf92f3577b34da6a3ce929d0e0e4736")
>>> [(i["workflow"], i["id"], i["status"]) for i in tree["instances"]]
[('parent', 'mom', 'complete')]
"""

from __future__ import annotations

import datetime
import json
import re
from collections import Counter
from typing import TYPE_CHECKING, Any

from conveyor.errors import InvalidRequest
from conveyor.tracing import TRACE_ID, TRACEPARENT
from conveyor.workflows.model import InstanceRow, StepRow

if TYPE_CHECKING:
    from conveyor.client.sync import Conveyor
    from conveyor.workflows.store import WorkflowStore

# The most instances one tree shows (one under the store's largest page over HTTP, 1,000, so that
# one more can be asked for); ``truncated`` says when more exist.
MAX_INSTANCES = 999
_STEP_KEY = re.compile(r"^(?P<type>[^:]+):(?P<name>.*):(?P<n>\d+)\Z", re.DOTALL)


def check_trace_id(given: object) -> str:
    """A trace id from ``given``: 32 lowercase hex, or the trace id of a W3C traceparent."""
    if isinstance(given, str):
        text = given.strip().lower()
        if TRACE_ID.match(text) and text != "0" * 32:
            return text
        if TRACEPARENT.match(text):
            return text[3:35]
    raise InvalidRequest(
        f"trace id {given!r} is not one: give 32 hex characters (an instance's trace_id) or a W3C traceparent"
    )


def trace_tree(client: Conveyor, trace_id: str, store: WorkflowStore | None = None) -> dict[str, Any]:
    """The trace's instances as a tree of plain JSON data: ``{"trace_id", "instances": [root
    instances], "summary": {"instances": {status: n}, "steps": {status: n}}, "truncated"}``; an
    instance is ``{"workflow", "id", "status", "error", "output", "created_on", "start", "end",
    "origin", "steps": [...], "children": [...]}``, a step ``{"name", "type", "status", "start",
    "end", "error", "attempts": [{"number", "start", "end", "success", "error", "messages":
    [{"queue", "id", "instances": [...]}]}], "event", "children": [...]}`` where ``event`` is
    the event a completed ``waitForEvent`` took, ``{"type", "payload", "timestamp"}`` (else None).
    Times are ISO-8601 UTC. ``store``: the workflow store to read (a server's own), else the
    client's."""
    from conveyor.workflows.client import workflow_store

    trace_id = check_trace_id(trace_id)
    store = store if store is not None else workflow_store(client)
    account = client.deployment.account
    rows = store.instances_by_trace(account, trace_id, MAX_INSTANCES + 1)
    truncated = len(rows) > MAX_INSTANCES
    rows = rows[:MAX_INSTANCES]
    nodes = {(r.workflow, r.id): _instance(r, store.steps(account, r.workflow, r.id)) for r in rows}
    roots = _link(nodes)
    return {
        "trace_id": trace_id,
        "instances": roots,
        "summary": {
            "instances": dict(Counter(n["status"] for n in nodes.values())),
            "steps": dict(Counter(s["status"] for n in nodes.values() for s in n["steps"])),
        },
        "truncated": truncated,
    }


def _link(nodes: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """Put each instance under its creator's step, message or instance; the rest are the roots."""
    steps: dict[tuple[str, str, str], dict[str, Any]] = {}
    messages: dict[tuple[str, str], dict[str, Any]] = {}
    for (workflow, instance_id), node in nodes.items():
        for step in node["steps"]:
            steps[(workflow, instance_id, step["key"])] = step
            for attempt in step["attempts"]:
                for message in attempt["messages"]:
                    messages[(message["queue"], message["id"])] = message
    roots: list[dict[str, Any]] = []
    for node in nodes.values():
        origin = node["origin"] or {}
        parent: list[dict[str, Any]] | None = None
        if "message" in origin:
            found = messages.get((str(origin.get("queue")), str(origin["message"])))
            parent = None if found is None else found["instances"]
        elif "instance" in origin:
            step = steps.get((str(origin.get("workflow")), str(origin["instance"]), str(origin.get("step"))))
            owner = nodes.get((str(origin.get("workflow")), str(origin["instance"])))
            parent = step["children"] if step is not None else None if owner is None else owner["children"]
        (roots if parent is None else parent).append(node)
    return roots


def _instance(row: InstanceRow, steps: list[StepRow]) -> dict[str, Any]:
    return {
        "workflow": row.workflow,
        "id": row.id,
        "status": row.status,
        "error": None if row.error is None else json.loads(row.error),
        "output": None if row.output is None else json.loads(row.output),
        "created_on": _iso(row.created_ms),
        "start": _iso(row.started_ms),
        "end": _iso(row.ended_ms),
        "origin": None if row.origin is None else json.loads(row.origin),
        "steps": [_step(s) for s in steps],
        "children": [],
    }


def _step(step: StepRow) -> dict[str, Any]:
    found = _STEP_KEY.match(step.key)
    n = found["n"] if found else "1"
    attempts = json.loads(step.attempts)
    status = step.status if step.status != "running" else ("waiting" if step.type != "step" else "running")
    return {
        "key": step.key,
        "name": f"{step.name}-{n}",
        "type": step.type,
        "status": status,
        "start": _iso(step.start_ms),
        "end": _iso(step.end_ms),
        "error": attempts[-1].get("error") if attempts and step.status == "errored" else None,
        "attempts": [_attempt(i, a) for i, a in enumerate(attempts, 1)],
        "event": _event(step),
        "children": [],
    }


def _event(step: StepRow) -> dict[str, Any] | None:
    """The event a completed wait took: what woke it, and from whom when its payload says."""
    if step.type != "waitForEvent" or step.status != "complete" or step.output is None:
        return None
    taken = json.loads(step.output)
    return {"type": taken.get("type"), "payload": taken.get("payload"), "timestamp": _iso(taken.get("timestamp"))}


def _attempt(number: int, attempt: dict[str, Any]) -> dict[str, Any]:
    return {
        "number": number,
        "start": _iso(attempt.get("start")),
        "end": _iso(attempt.get("end")),
        "success": attempt.get("success"),
        "error": attempt.get("error"),
        "messages": [{"queue": m["queue"], "id": m["id"], "instances": []} for m in attempt.get("messages", [])],
    }


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    when = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
