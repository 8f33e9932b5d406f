"""``conveyor trace ID``: the whole tree of one run (instances, steps, attempts, messages,
children) from what the engine stored."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Group, RenderableType
from rich.text import Text
from rich.tree import Tree

from conveyor.cli.context import CliState, emit, json_option, pass_state
from conveyor.workflows.traces import MAX_INSTANCES, trace_tree

EVENT_CHARS = 200  # of an event's payload, shown under the wait that took it

STATUS_STYLE = {
    "complete": "green",
    "errored": "bold red",
    "terminated": "red",
    "running": "yellow",
    "waiting": "cyan",
    "waitingForPause": "magenta",
    "paused": "magenta",
    "queued": "dim",
}


def status_text(status: str) -> Text:
    return Text(status, style=STATUS_STYLE.get(status, ""))


def _clock(iso: str | None) -> str:
    return "-" if iso is None else iso[11:23]


def _error(error: dict[str, str] | None) -> Text:
    if not error:
        return Text("")
    return Text(f"  {error.get('name', 'Error')}: {error.get('message', '')}", style="red")


def _instance_label(node: dict[str, Any]) -> Text:
    label = Text.assemble(
        (f"{node['workflow']}/{node['id']}", "bold"),
        "  ",
        status_text(node["status"]),
        f"  {_clock(node['start'] or node['created_on'])} → {_clock(node['end'])}",
    )
    return label.append_text(_error(node["error"]))


def _add_instance(tree: Tree, node: dict[str, Any]) -> None:
    branch = tree.add(_instance_label(node))
    for step in node["steps"]:
        _add_step(branch, step)
    for child in node["children"]:
        _add_instance(branch, child)


def _add_step(tree: Tree, step: dict[str, Any]) -> None:
    attempts = step["attempts"]
    tries = f"  {len(attempts)} attempts" if len(attempts) > 1 else ""
    label = Text.assemble(
        (f"{step['type']} {step['name']}", "cyan" if step["type"] == "step" else "blue"),
        "  ",
        status_text(step["status"]),
        tries,
    )
    branch = tree.add(label.append_text(_error(step["error"])))
    # Each attempt is shown when there is something to see: a failure, or messages it sent.
    shown = len(attempts) > 1 or any(a["messages"] for a in attempts)
    for attempt in attempts if shown else ():
        outcome = "ok" if attempt["success"] else ("interrupted" if attempt["end"] is None else "failed")
        under = branch.add(
            Text.assemble(
                f"attempt {attempt['number']}  ",
                (outcome, "green" if attempt["success"] else "red"),
                f"  {_clock(attempt['start'])} → {_clock(attempt['end'])}",
            ).append_text(_error(None if attempt["success"] else attempt["error"]))
        )
        for message in attempt["messages"]:
            sent = under.add(Text(f"message {message['queue']}/{message['id']}", style="dim"))
            for child in message["instances"]:
                _add_instance(sent, child)
    event = step.get("event")
    if event is not None:
        payload = json.dumps(event["payload"], separators=(",", ":"))
        shown_payload = payload if len(payload) <= EVENT_CHARS else payload[: EVENT_CHARS - 1] + "…"
        branch.add(Text(f"event {event['type']}  {_clock(event['timestamp'])}  {shown_payload}", style="dim"))
    for child in step["children"]:
        _add_instance(branch, child)


def _summary(counts: dict[str, int], noun: str) -> str:
    total = sum(counts.values())
    parts = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    return f"{total} {noun}{'' if total == 1 else 's'}" + (f" ({parts})" if parts else "")


def render_tree(tree: dict[str, Any]) -> RenderableType:
    """The trace as a rich tree, with a line of counts by status above it."""
    if not tree["instances"]:
        return Text(f"no workflow instance has trace {tree['trace_id']}", style="dim")
    summary = tree["summary"]
    top = Tree(
        Text.assemble(
            ("trace ", "bold"),
            (tree["trace_id"], "bold"),
            f"  {_summary(summary['instances'], 'instance')}, {_summary(summary['steps'], 'step')}",
        )
    )
    for node in tree["instances"]:
        _add_instance(top, node)
    if tree["truncated"]:
        return Group(top, Text(f"(only the first {MAX_INSTANCES} instances are shown)", style="yellow"))
    return top


@click.command("trace", short_help="Print the whole tree of one run: instances, steps, attempts, messages.")
@click.argument("trace_id", metavar="ID")
@json_option
@pass_state
def trace(state: CliState, trace_id: str, as_json: bool) -> None:
    """The tree of the run whose trace is ID (a trace id, a W3C traceparent, or WORKFLOW/INSTANCE
    for that instance's trace): every workflow instance of the trace, its steps and their attempts
    (with errors), the messages each attempt sent, and the instances created by a step or by a
    handler of such a message, with statuses, so a partial success shows where it stopped.

    \b
    conveyor trace 4bf92f3577b34da6a3ce929d0e0e4736
    conveyor trace download-package/jquery-1
    conveyor trace --json 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
    """
    cv = state.connect()
    if "/" in trace_id:
        workflow, _, instance_id = trace_id.partition("/")
        trace_id = cv.workflow(workflow).get(instance_id).status().trace_id
    tree = trace_tree(cv, trace_id)
    emit(as_json, tree, lambda: render_tree(tree))
