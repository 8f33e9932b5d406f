"""``conveyor workflows ...``: wrangler's ``workflows`` commands, on any deployment.

``list | describe | trigger | delete`` for workflows, ``instances list | describe | pause | resume |
terminate | restart | send-event`` for their instances: the same arguments and options as
wrangler's, tables for people and ``--json`` (Cloudflare's object shapes) for scripts.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import click
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

import conveyor
from conveyor import wire
from conveyor.cli.context import CliError, CliState, ConveyorGroup, emit, json_option, pass_state
from conveyor.cli.render import plural
from conveyor.cli.trace import status_text
from conveyor.wire import workflows as shapes
from conveyor.workflows.client import Instance, Workflow, workflow_store
from conveyor.workflows.model import STATUSES, InstancePage, InstanceStatus, InstanceSummary, Retries, StepRecord

DEFAULT_PER_PAGE = 50
DEFAULT_OUTPUT_LIMIT = 5000


@click.group("workflows", cls=ConveyorGroup, short_help="Manage workflows and their instances.")
def workflows_group() -> None:
    """Manage workflows (list, describe, trigger, delete) and their instances (instances list,
    describe, pause, resume, terminate, restart, send-event), as wrangler's `workflows` commands.

    \b
    conveyor workflows list
    conveyor workflows trigger download-package '{"name": "jquery"}' --id jquery-1
    conveyor workflows instances describe download-package latest
    """


@workflows_group.group("instances", cls=ConveyorGroup, short_help="Manage the instances of a workflow.")
def instances_group() -> None:
    """List, inspect and change the instances of a workflow."""


# -- shapes (the REST API's own structs, conveyor.wire.workflows) ------------------------------
def workflow_json(wf: Workflow, counts: dict[str, int], has_worker: bool) -> dict[str, Any]:
    """Cloudflare's ``Workflow`` object, as ``GET /workflows/{name}`` answers."""
    return wire.to_builtins(shapes.workflow(wf.record, counts, has_worker))  # type: ignore[no-any-return]


def _scheduled(cv: conveyor.Conveyor, wf: Workflow, ids: list[str]) -> set[str]:
    """Which of the instances ``ids`` a cron tick started (their ``trigger_source`` is ``cron``)."""
    if not wf.record.settings.schedules:
        return set()
    store = workflow_store(cv)
    rows = (store.get_instance(cv.deployment.account, wf.name, i) for i in ids)
    return {row.id for row in rows if row is not None and row.scheduled_ms is not None}


def instance_json(cv: conveyor.Conveyor, wf: Workflow, s: InstanceStatus) -> dict[str, Any]:
    """Cloudflare's ``InstanceGet`` (``versionId`` camelCase as on its wire), with the instance's
    id, workflow and trace id."""
    row = workflow_store(cv).get_instance(cv.deployment.account, wf.name, s.id)
    crons = wf.record.settings.schedules
    detail = shapes.instance_detail(
        s,
        simple=False,
        descending=False,
        scheduled_ms=None if row is None else row.scheduled_ms,
        cron=crons[0] if len(crons) == 1 else None,
    )
    return {"id": s.id, "workflow": s.workflow, "trace_id": s.trace_id, **wire.to_builtins(detail)}


# -- helpers ------------------------------------------------------------------------------------
def _parse_json(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliError(f"{what} is not JSON: {exc}") from None


def _instance(cv: conveyor.Conveyor, name: str, instance_id: str) -> Instance:
    """The instance ``instance_id`` of ``name``; ``latest`` is its most recently created one."""
    wf = cv.workflow(name)
    if instance_id != "latest":
        return wf.get(instance_id)
    newest = wf.list_instances(per_page=1, direction="desc").instances
    if not newest:
        raise CliError(f"workflow {name!r} has no instances, so none is the latest")
    return wf.get(newest[0].id)


def _date(text: str | None, what: str, end_of_day: bool) -> datetime.datetime | None:
    """An ISO-8601 date or time (UTC unless it names its zone); a bare date given as an end covers
    its whole day, as wrangler widens it."""
    if text is None:
        return None
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CliError(
            f"{what} {text!r} is not an ISO-8601 date or time (2026-12-03 or 2026-12-03T10:00:00Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    if end_of_day and len(text) == 10:
        when += datetime.timedelta(days=1, milliseconds=-1)
    return when


def _short(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def _clock(when: datetime.datetime | None) -> str:
    return "-" if when is None else when.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _iso_clock(iso: str) -> str:
    """An ISO-8601 time of the wire as ``_clock`` shows a datetime."""
    return _clock(datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")))


def _seconds(start: datetime.datetime | None, end: datetime.datetime | None) -> str:
    if start is None or end is None:
        return "-"
    return f"{(end - start).total_seconds():.3f} s"


def _done(verb: str, name: str, instance_id: str) -> Text:
    return Text.assemble(f"{verb} instance ", (instance_id, "bold"), " of workflow ", (name, "bold cyan"))


# -- workflows ----------------------------------------------------------------------------------
@workflows_group.command("list", short_help="List the account's workflows.")
@click.option("--page", type=click.IntRange(min=1), default=1, show_default=True, help="Which page to show.")
@click.option(
    "--per-page", type=click.IntRange(1, 100), default=DEFAULT_PER_PAGE, show_default=True, help="Workflows a page."
)
@json_option
@pass_state
def list_workflows(state: CliState, page: int, per_page: int, as_json: bool) -> None:
    """List the workflows (registered by a worker, or made by a PUT), by name, with their instances
    by status and whether a worker runs them."""
    cv = state.connect()
    shown = cv.list_workflows()[(page - 1) * per_page : page * per_page]
    rows = [(wf, wf.instance_counts(), wf.has_worker()) for wf in shown]
    emit(as_json, [workflow_json(*row) for row in rows], lambda: _workflows_table(rows, page))


def _workflows_table(rows: list[tuple[Workflow, dict[str, int], bool]], page: int) -> RenderableType:
    if not rows:
        if page > 1:
            return Text(f"No workflows on page {page}.", style="dim")
        return Text("No workflows yet: a worker registers its workflows when it starts.", style="dim")
    table = Table(title="Workflows", title_justify="left")
    table.add_column("name", style="bold cyan", no_wrap=True)
    table.add_column("script")
    table.add_column("instances")
    table.add_column("schedules")
    table.add_column("worker")
    table.add_column("modified", no_wrap=True)
    for wf, counts, has_worker in rows:
        busy = ", ".join(f"{n} {status}" for status, n in counts.items() if n) or "none"
        script = f"{wf.record.script_name}:{wf.record.class_name}" if wf.record.class_name else wf.record.script_name
        table.add_row(
            wf.name,
            script or "-",
            busy,
            " ".join(wf.record.settings.schedules) or "-",
            Text("yes", style="green") if has_worker else Text("no worker", style="yellow"),
            _clock(datetime.datetime.fromtimestamp(wf.record.modified_ms / 1000, datetime.UTC)),
        )
    return table


@workflows_group.command("describe", short_help="Show a workflow: settings, versions, instances.")
@click.argument("name")
@json_option
@pass_state
def describe_workflow(state: CliState, name: str, as_json: bool) -> None:
    """Show the workflow NAME: its script, settings, current version, instances by status, and
    every version it had (newest first)."""
    cv = state.connect()
    wf = cv.workflow(name)
    versions = [wire.to_builtins(shapes.version(v, cv.deployment.account)) for v in wf.versions()]
    data = {**workflow_json(wf, wf.instance_counts(), wf.has_worker()), "versions": versions}
    emit(as_json, data, lambda: _workflow_panel(wf, data))


def _workflow_panel(wf: Workflow, data: dict[str, Any]) -> RenderableType:
    info = Table.grid(padding=(0, 2))
    info.add_column(style="bold")
    info.add_column()
    settings = wf.record.settings
    script = f"{data['script_name']}:{data['class_name']}" if data["class_name"] else data["script_name"]
    for key, value in (
        ("Name", data["name"]),
        ("Script", script or "-"),
        ("Worker", "running" if data["has_worker"] else "no worker (its instances stay queued)"),
        ("Version", data["version_id"]),
        ("Created", _iso_clock(data["created_on"])),
        ("Modified", _iso_clock(data["modified_on"])),
        ("Schedules", " ".join(s["cron"] for s in data["schedules"]) or "-"),
        ("Step limit", f"{settings.max_steps:,}"),
        ("Concurrency", "-" if settings.concurrency is None else str(settings.concurrency)),
        (
            "Retention",
            f"{settings.success_retention_ms / 86_400_000:g} days complete, "
            f"{settings.error_retention_ms / 86_400_000:g} days errored or terminated",
        ),
        ("Instances", ", ".join(f"{n} {s}" for s, n in data["instances"].items() if n) or "none"),
    ):
        info.add_row(key, str(value))
    versions = Table(title="Versions", title_justify="left")
    versions.add_column("id", no_wrap=True)
    versions.add_column("class")
    versions.add_column("code")
    versions.add_column("created", no_wrap=True)
    for v in data["versions"]:
        versions.add_row(v["id"], v["class_name"] or "-", "yes" if v["has_code"] else "no", _iso_clock(v["created_on"]))
    return Group(info, Text(""), versions)


@workflows_group.command("trigger", short_help="Create an instance of a workflow.")
@click.argument("name")
@click.argument("params", required=False)
@click.option("--id", "instance_id", help="The instance's id (unique in the workflow; a new UUID if not given).")
@click.option("--traceparent", help="The W3C traceparent the instance's trace continues (a new trace if not given).")
@json_option
@pass_state
def trigger(
    state: CliState, name: str, params: str | None, instance_id: str | None, traceparent: str | None, as_json: bool
) -> None:
    """Create an instance of the workflow NAME with PARAMS (a JSON value, e.g. '{"name": "jquery"}');
    a worker that runs the workflow starts it."""
    wf = state.connect().workflow(name)
    inst = wf.create(_parse_json(params, "PARAMS"), id=instance_id, traceparent=traceparent)
    s = inst.status()
    created = shapes.InstanceCreated(
        id=s.id, status="queued", version_id=s.version_id, workflow_id=shapes.workflow_id(wf.record)
    )
    data = {**wire.to_builtins(created), "status": s.status, "trace_id": s.trace_id}
    emit(as_json, data, lambda: _done("Created", name, s.id).append(f" (trace {s.trace_id})", style="dim"))


@workflows_group.command("delete", short_help="Delete a workflow and all its instances.")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation when the workflow has instances.")
@json_option
@pass_state
def delete_workflow(state: CliState, name: str, yes: bool, as_json: bool) -> None:
    """Delete the workflow NAME with its versions and every instance (their ids are never given
    again). A workflow with instances asks you to type its name, unless --yes is given. A worker
    that runs its code registers it again when it starts."""
    wf = state.connect().workflow(name)
    total = sum(wf.instance_counts().values())
    if total and not yes:
        typed = click.prompt(
            f"Workflow {name} has {plural(total, 'instance')}; deleting it deletes them for good. "
            "Type the workflow name to proceed",
            default="",
            show_default=False,
            err=True,
        )
        if typed != name:
            raise CliError(f"delete aborted: you typed {typed!r}, not {name!r}")
    wf.delete()
    emit(
        as_json,
        {"deleted": True, "name": name, "instances": total},
        lambda: Text.assemble("Deleted workflow ", (name, "bold cyan"), f" and {plural(total, 'instance')}"),
    )


# -- instances ----------------------------------------------------------------------------------
@instances_group.command("list", short_help="List the instances of a workflow.")
@click.argument("name")
@click.option("--status", type=click.Choice(STATUSES), help="Only instances in this status.")
@click.option("--date-start", help="Only instances created at or after this ISO-8601 date or time (UTC).")
@click.option("--date-end", help="Only instances created at or before this date or time (a bare date: its whole day).")
@click.option("--page", type=click.IntRange(min=1), default=1, show_default=True, help="Which page to show.")
@click.option(
    "--per-page", type=click.IntRange(1, 100), default=DEFAULT_PER_PAGE, show_default=True, help="Instances a page."
)
@click.option("--reverse", is_flag=True, help="Oldest first (the default is newest first, as wrangler's).")
@json_option
@pass_state
def list_instances(
    state: CliState,
    name: str,
    status: str | None,
    date_start: str | None,
    date_end: str | None,
    page: int,
    per_page: int,
    reverse: bool,
    as_json: bool,
) -> None:
    """List the instances of the workflow NAME, newest first, a page at a time."""
    cv = state.connect()
    wf = cv.workflow(name)
    options: dict[str, Any] = {
        "date_start": _date(date_start, "--date-start", False),
        "date_end": _date(date_end, "--date-end", True),
        "per_page": per_page,
        "direction": "asc" if reverse else "desc",
    }
    found = wf.list_instances(status, **options)
    for _ in range(page - 1):  # page N is reached by following the cursor, as wrangler does
        if found.cursor is None:
            found = InstancePage([], None)
            break
        found = wf.list_instances(status, cursor=found.cursor, **options)
    wf_id = shapes.workflow_id(wf.record)
    scheduled = _scheduled(cv, wf, [s.id for s in found.instances])
    emit(
        as_json,
        [wire.to_builtins(shapes.instance_listed(s, wf_id, s.id in scheduled)) for s in found.instances],
        lambda: _instances_table(name, found.instances, found.cursor is not None, page),
    )


def _instances_table(name: str, rows: list[InstanceSummary], more: bool, page: int) -> RenderableType:
    if not rows:
        return Text(f"Workflow {name} has no instances{' on this page' if page > 1 else ''}.", style="dim")
    table = Table(title=f"Instances of {name}", title_justify="left")
    table.add_column("id", style="bold", no_wrap=True)
    table.add_column("status")
    table.add_column("created", no_wrap=True)
    table.add_column("started", no_wrap=True)
    table.add_column("ended", no_wrap=True)
    table.add_column("version", style="dim", no_wrap=True)
    for s in rows:
        table.add_row(
            s.id, status_text(s.status), _clock(s.created_on), _clock(s.started_on), _clock(s.ended_on), s.version_id
        )
    if more:
        return Group(table, Text(f"More on --page {page + 1}.", style="dim"))
    return table


@instances_group.command("describe", short_help="Show an instance and its step timeline.")
@click.argument("name")
@click.argument("instance_id", metavar="ID", default="latest")
@click.option(
    "--step-output/--no-step-output", default=True, show_default=True, help="Show each step's output in the timeline."
)
@click.option(
    "--truncate-output-limit",
    type=click.IntRange(min=1),
    default=DEFAULT_OUTPUT_LIMIT,
    show_default=True,
    help="Characters of an output shown before it is cut.",
)
@json_option
@pass_state
def describe_instance(
    state: CliState, name: str, instance_id: str, step_output: bool, truncate_output_limit: int, as_json: bool
) -> None:
    """Show the instance ID of the workflow NAME (`latest`, the default: its newest): status,
    params, output or error, trace id, and the timeline of its steps (each step's start, duration,
    attempts, when a failed one is retried, output and error)."""
    cv = state.connect()
    inst = _instance(cv, name, instance_id)
    s = inst.status()
    emit(as_json, instance_json(cv, inst.workflow, s), lambda: _instance_view(s, step_output, truncate_output_limit))


def _retries_at(step: StepRecord) -> datetime.datetime | None:
    """When a step whose last attempt failed is tried again (its retry delay grown by its backoff)."""
    if step.type != "step" or step.success is not None or not step.attempts:
        return None
    last = step.attempts[-1]
    if last.success is not False or last.end is None:
        return None
    retries = step.config.get("retries", {})
    failed = sum(1 for a in step.attempts if a.success is False)
    rule = Retries(limit=int(retries.get("limit", 0)), backoff=retries.get("backoff", "exponential"))
    delay = rule.delay_after(failed, float(retries.get("delay", 0)) / 1000)
    return last.end + datetime.timedelta(seconds=delay)


def _instance_view(s: InstanceStatus, step_output: bool, limit: int) -> RenderableType:
    info = Table.grid(padding=(0, 2))
    info.add_column(style="bold")
    info.add_column()
    rows: list[tuple[str, Any]] = [
        ("Workflow", s.workflow),
        ("Instance", s.id),
        ("Status", status_text(s.status)),
        ("Version", s.version_id),
        ("Trace", s.trace_id),
        ("Queued", _clock(s.queued)),
        ("Start", _clock(s.start)),
        ("End", _clock(s.end)),
        ("Duration", _seconds(s.start, s.end)),
        ("Params", _short(s.params, limit)),
    ]
    if s.output is not None:
        rows.append(("Output", _short(s.output, limit)))
    if s.error:
        rows.append(("Error", Text(f"{s.error.get('name')}: {s.error.get('message')}", style="red")))
    for key, value in rows:
        info.add_row(key, value)
    if not s.steps:
        return Group(info, Text(""), Text("No steps yet.", style="dim"))
    return Group(info, Text(""), _timeline(s, step_output, limit))


def _timeline(s: InstanceStatus, step_output: bool, limit: int) -> Table:
    origin = s.start or s.queued
    table = Table(title="Steps", title_justify="left")
    table.add_column("#", justify="right", style="dim")
    table.add_column("step", style="bold", no_wrap=True)
    table.add_column("type")
    table.add_column("status")
    table.add_column("at", justify="right", no_wrap=True)
    table.add_column("took", justify="right", no_wrap=True)
    table.add_column("attempts", justify="right")
    table.add_column("retries at", no_wrap=True)
    if step_output:
        table.add_column("output")
    table.add_column("error", style="red")
    for number, step in enumerate(s.steps, 1):
        if step.success is None:
            shown = "running" if step.type == "step" else "waiting"
        else:
            shown = "complete" if step.success else "errored"
        at = "-" if origin is None or step.start is None else f"+{(step.start - origin).total_seconds():.3f} s"
        failed = [a for a in step.attempts if a.success is False]
        # A step that ended well shows how many attempts failed before; one still trying, why.
        error = step.error or (failed[-1].error if failed and step.success is None else None)
        attempts = str(len(step.attempts)) + (f" ({len(failed)} failed)" if failed else "")
        retry = _retries_at(step)
        row: list[Any] = [
            str(number),
            step.name,
            step.type,
            status_text(shown),
            at,
            _seconds(step.start, step.end),
            attempts if step.type == "step" else "-",
            "-" if retry is None else _clock(retry),
        ]
        if step_output:
            row.append("-" if step.output is None else _short(step.output, limit))
        row.append("" if not error else f"{error.get('name')}: {error.get('message')}")
        table.add_row(*row)
    return table


def _status_change(command: str, verb: str, short_help: str, help: str) -> click.Command:
    """``instances pause|resume|terminate NAME ID``: one method of the instance, then its status."""

    @instances_group.command(command, short_help=short_help, help=help)
    @click.argument("name")
    @click.argument("instance_id", metavar="ID")
    @json_option
    @pass_state
    def change(state: CliState, name: str, instance_id: str, as_json: bool) -> None:
        inst = _instance(state.connect(), name, instance_id)
        getattr(inst, command)()
        _changed(as_json, name, inst, verb)

    return change


pause = _status_change(
    "pause",
    "Paused",
    "Pause an instance.",
    "Pause the instance ID of NAME (at once when it sleeps, waits or is queued; a running one once its "
    "current step ends).",
)
resume = _status_change(
    "resume",
    "Resumed",
    "Resume a paused instance.",
    "Resume the paused instance ID of NAME (its timers shifted by the time it was paused).",
)
terminate = _status_change(
    "terminate",
    "Terminated",
    "Terminate an instance.",
    "End the instance ID of NAME as `terminated` (a step running now has its result discarded).",
)


@instances_group.command("restart", short_help="Restart an instance, from the start or from a step.")
@click.argument("name")
@click.argument("instance_id", metavar="ID")
@click.option("--from-step-name", help="Restart from this step, keeping the results of the steps before it.")
@click.option("--from-step-count", type=click.IntRange(min=1), help="Which occurrence of that step name (default 1).")
@click.option(
    "--from-step-type", type=click.Choice(["do", "sleep", "waitForEvent"]), help="That step's type (default do)."
)
@json_option
@pass_state
def restart(
    state: CliState,
    name: str,
    instance_id: str,
    from_step_name: str | None,
    from_step_count: int | None,
    from_step_type: str | None,
    as_json: bool,
) -> None:
    """Run the instance ID of NAME again: from the start, or from --from-step-name (the steps
    before it keep their results)."""
    if from_step_name is None and (from_step_count is not None or from_step_type is not None):
        raise click.UsageError("--from-step-count and --from-step-type need --from-step-name")
    inst = _instance(state.connect(), name, instance_id)
    spec: dict[str, Any] | None = None
    if from_step_name is not None:
        spec = {"name": from_step_name, "count": from_step_count or 1, "type": from_step_type or "do"}
    inst.restart(spec)
    _changed(as_json, name, inst, "Restarted")


@instances_group.command("send-event", short_help="Send an event to an instance.")
@click.argument("name")
@click.argument("instance_id", metavar="ID")
@click.option("--type", "event_type", required=True, help="The event's type (what wait_for_event waits for).")
@click.option("--payload", help="The event's payload, a JSON value (default: null).")
@json_option
@pass_state
def send_event(
    state: CliState, name: str, instance_id: str, event_type: str, payload: str | None, as_json: bool
) -> None:
    """Send an event of --type to the instance ID of NAME: its next wait for that type gets it
    (events wait, in order, until a wait takes them)."""
    inst = _instance(state.connect(), name, instance_id)
    inst.send_event(event_type, _parse_json(payload, "--payload"))
    _changed(as_json, name, inst, f"Sent a {event_type!r} event to")


def _changed(as_json: bool, name: str, inst: Instance, verb: str) -> None:
    status = inst.status().status
    emit(
        as_json,
        {"id": inst.id, "workflow": name, "status": status},
        lambda: _done(verb, name, inst.id).append_text(Text.assemble(" (now ", status_text(status), ")")),
    )
