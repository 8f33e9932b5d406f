"""``conveyor probe ...``: a fleet's targets (``targets add|list|remove|import``), a round now
(``round --now``), the seed's bar (``report``), the fleets (``fleets``), and a worker for fleets
whose targets need only the built-in ``http`` check (``worker``). A fleet whose checks are code of
its own runs under ``conveyor worker myprobes:app`` instead (docs/prober.md).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from conveyor.cli.context import CliError, CliState, ConveyorGroup, console, emit, json_option, pass_state
from conveyor.cli.render import plural
from conveyor.prober.errors import InvalidTarget
from conveyor.prober.model import HTTP_CHECK, Shape, parse_interval

if TYPE_CHECKING:
    from conveyor.prober.fleet import FleetHandle
    from conveyor.prober.report import Report, RoundSummary

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_FLEET = "default"


def fleet_option(fn: F) -> F:
    """``--fleet NAME`` (``$CONVEYOR_PROBE_FLEET``, else ``default``)."""
    return click.option(
        "--fleet",
        "fleet_name",
        envvar="CONVEYOR_PROBE_FLEET",
        default=DEFAULT_FLEET,
        show_default=True,
        metavar="NAME",
        help="The fleet. Env: CONVEYOR_PROBE_FLEET.",
    )(fn)


def _fleet(state: CliState, name: str) -> FleetHandle:
    from conveyor.prober.fleet import fleet

    return fleet(state.connect(), name)


def _ms_time(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _duration(ms: int) -> str:
    seconds = ms / 1000
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


@click.group("probe", cls=ConveyorGroup, short_help="Fan-out rounds of checks over a fleet (the prober).")
def probe_group() -> None:
    """A fleet's targets, its rounds and its report (docs/prober.md).

    \b
    conveyor probe targets add https://mcp.example.com/health --fleet mcp
    conveyor probe worker --fleet mcp            # runs the rounds every 5 minutes
    conveyor probe round --now --wait --fleet mcp
    conveyor probe report --since 72h --fleet mcp
    """


@probe_group.group("targets", cls=ConveyorGroup, short_help="Add, list, import and remove a fleet's targets.")
def targets_group() -> None:
    """A fleet's targets: an address, the name of its check, and its interval."""


def _target_options(fn: F) -> F:
    fn = click.option("--interval", default=None, metavar="DURATION", help="How often: 12h (default), 30m, 3600.")(fn)
    return click.option(
        "--check",
        default=HTTP_CHECK,
        show_default=True,
        help="The check's name: http (built in), or one the fleet's worker registers.",
    )(fn)


@targets_group.command("add")
@click.argument("addresses", nargs=-1, required=True, metavar="ADDRESS...")
@_target_options
@click.option("--host", default=None, help="The host the targets count against (default: the address's).")
@fleet_option
@json_option
@pass_state
def add(
    state: CliState,
    addresses: tuple[str, ...],
    check: str,
    interval: str | None,
    host: str | None,
    fleet_name: str,
    as_json: bool,
) -> None:
    """Add targets (an http check's address is a URL), due at once; all or none."""
    items = [_item(address, check, interval, host) for address in addresses]
    added, listed = _fleet(state, fleet_name).import_targets(items)
    emit(as_json, {"added": added, "already_listed": listed}, lambda: _added(added, listed, fleet_name))


def _item(address: str, check: str, interval: str | None, host: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"address": address, "check": check}
    if interval is not None:
        item["interval"] = interval
    if host is not None:
        item["host"] = host
    return item


def _added(added: int, listed: int, fleet: str) -> Text:
    return Text.assemble(f"Added {added:,} targets to fleet ", (fleet, "bold cyan"), f" ({listed:,} listed already)")


@targets_group.command("import")
@click.argument("file", type=click.File("r"), metavar="FILE")
@_target_options
@fleet_option
@json_option
@pass_state
def import_(state: CliState, file: Any, check: str, interval: str | None, fleet_name: str, as_json: bool) -> None:
    """Add the targets of FILE ('-': standard input), all or none: a JSON array of objects with an
    address and, each optional, check, interval and host; or one address per line ('#' starts a
    comment), taking --check and --interval."""
    text = file.read()
    items = _parse_file(text, check, interval)
    added, listed = _fleet(state, fleet_name).import_targets(items)
    emit(as_json, {"added": added, "already_listed": listed}, lambda: _added(added, listed, fleet_name))


def _parse_file(text: str, check: str, interval: str | None) -> list[dict[str, Any]]:
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except ValueError as exc:
            raise CliError(f"FILE is not valid JSON: {exc}") from None
        if not isinstance(items, list):
            raise CliError("FILE's JSON must be an array of targets")
        return items
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [_item(line, check, interval) for line in lines if line]


@targets_group.command("list")
@fleet_option
@json_option
@pass_state
def list_targets(state: CliState, fleet_name: str, as_json: bool) -> None:
    """The fleet's targets, each with its latest outcome."""
    found = _fleet(state, fleet_name).targets()

    def table() -> RenderableType:
        if not found:
            return Text(f"Fleet {fleet_name} has no targets. Add one: conveyor probe targets add URL", style="dim")
        out = Table(title=f"Fleet {fleet_name}: {len(found):,} targets", title_justify="left")
        for column in ("id", "address", "host", "check", "every", "due", "last", "latency", "error"):
            out.add_column(column, no_wrap=column != "error")
        for t in found:
            last: str | Text = "-" if t.last_state is None else t.last_state
            if t.last_state == "finished":
                last = Text("ok", style="green") if t.last_ok else Text("failed", style="bold red")
            latency = "-" if t.last_latency_ms is None else f"{t.last_latency_ms:,} ms"
            out.add_row(
                t.id,
                t.address,
                t.host,
                t.check,
                _duration(t.interval_ms),
                _ms_time(t.due_ms),
                last,
                latency,
                t.last_error or "",
            )
        return out

    emit(as_json, [t.as_dict() for t in found], table)


@targets_group.command("remove")
@click.argument("keys", nargs=-1, required=True, metavar="ID_OR_ADDRESS...")
@fleet_option
@json_option
@pass_state
def remove(state: CliState, keys: tuple[str, ...], fleet_name: str, as_json: bool) -> None:
    """Remove targets by id or address; their jobs not yet started are cancelled."""
    fleet = _fleet(state, fleet_name)
    removed = [name for key in keys for name in fleet.remove(key)]
    emit(as_json, {"removed": removed}, lambda: f"Removed {len(removed):,} targets: " + ", ".join(removed))


@probe_group.command("round")
@click.argument("round_id", required=False)
@click.option("--now", "now", is_flag=True, help="Ask the fleet's worker for a round now.")
@click.option("--wait", is_flag=True, help="With --now: return once every job of the round has ended.")
@click.option("--timeout", type=click.FloatRange(0), default=600.0, show_default=True, help="Seconds --wait waits.")
@fleet_option
@json_option
@pass_state
def round_(
    state: CliState, round_id: str | None, now: bool, wait: bool, timeout: float, fleet_name: str, as_json: bool
) -> None:
    """Start a round now (--now: the fleet's worker runs it, as a cron tick), or show ROUND_ID."""
    if now == (round_id is not None):
        raise click.UsageError("give --now to start a round, or a ROUND_ID to show one")
    fleet = _fleet(state, fleet_name)
    if round_id is None:
        round_id = fleet.round_now(wait=wait, timeout=timeout)
    summary = fleet.round(round_id)
    if summary is None:
        emit(as_json, {"id": round_id, "claimed": False}, lambda: f"Round {round_id} asked for; not claimed yet")
        return
    emit(as_json, summary.as_dict(), lambda: _round_text(summary))


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _round_text(summary: RoundSummary) -> Text:
    states = ", ".join(f"{n:,} {state}" for state, n in sorted(summary.states.items())) or "no jobs"
    shape = Shape(summary.messages, summary.per_message, summary.at_a_time)
    return Text.assemble(
        ("Round ", ""),
        (summary.id, "bold cyan"),
        f" ({summary.trigger}, {shape}): {summary.jobs:,} jobs ({states}), ",
        (f"{summary.failed:,} failed", "bold red" if summary.failed else ""),
        f"; {_seconds(summary.seconds)} from its first job to its last check, "
        f"{_seconds(summary.seconds_from_mark)} from its mark",
    )


def _since(value: str | None, now_ms: int) -> int | None:
    if value is None:
        return None
    try:
        return now_ms - parse_interval(value, "--since")
    except InvalidTarget:
        pass  # not a duration: a date and time then
    try:
        when = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        problem = f"{value!r} is neither a duration (24h, 3d) nor an ISO time"
        raise click.BadParameter(problem, param_hint="--since") from None
    return round((when if when.tzinfo else when.replace(tzinfo=datetime.UTC)).timestamp() * 1000)


@probe_group.command("report")
@click.option(
    "--since", default=None, metavar="DURATION|TIME", help="Jobs claimed since: 72h, 3d, or an ISO time (default 24h)."
)
@click.option(
    "--min-gap", default="10m", show_default=True, metavar="DURATION", help="Two runs closer than this are counted."
)
@fleet_option
@json_option
@pass_state
def report(state: CliState, since: str | None, min_gap: str, fleet_name: str, as_json: bool) -> None:
    """The fleet's bar: jobs vs runs, targets checked twice within --min-gap, hosts with two jobs in
    flight, targets checked per day, round times, failed checks."""
    cv = state.connect()
    figures = _fleet(state, fleet_name).report(
        _since(since, cv.engine.clock.now_ms()), min_gap_ms=parse_interval(min_gap, "--min-gap")
    )
    emit(as_json, figures.as_dict(), lambda: _report_tables(figures))


def _report_tables(r: Report) -> RenderableType:
    def bad(count: int) -> Text:
        return Text(f"{count:,}", style="bold red" if count else "green")

    checked = sum(d.checked for d in r.days)
    listed = sum(d.listed for d in r.days)
    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="bold")
    summary.add_column()
    summary.add_row(
        "jobs vs runs",
        f"{r.jobs:,} jobs, {r.runs:,} runs: {r.finished:,} finished, {r.abandoned:,} abandoned "
        f"({r.abandoned_started:,} had started), {r.cancelled:,} cancelled, {r.open:,} open",
    )
    summary.add_row(
        "every job accounted for",
        Text("yes", style="green")
        if r.accounted
        else Text(f"no: {r.overdue:,} open past their lease", style="bold red"),
    )
    summary.add_row(f"targets with two runs < {_duration(round(r.min_gap_seconds * 1000))} apart", bad(r.close_targets))
    summary.add_row("hosts with two jobs in flight", bad(r.host_overlaps))
    summary.add_row("targets checked per day", f"{checked:,} of {listed:,}")
    summary.add_row(
        "round time (first job → last check)",
        f"median {_seconds(r.round_median_seconds)}, slowest {_seconds(r.round_slowest_seconds)} "
        f"over {plural(r.rounds, 'round')}",
    )
    summary.add_row(
        "round time from its mark",
        f"median {_seconds(r.mark_median_seconds)}, slowest {_seconds(r.mark_slowest_seconds)}",
    )
    summary.add_row("failed checks", Text.assemble(bad(r.failed), f" of {r.passed + r.failed:,}"))
    title = Text.assemble(
        ("Fleet ", "bold"), (r.fleet, "bold cyan"), f": jobs claimed since {_ms_time(r.since_ms)} UTC"
    )
    days = Table("day", "checked", "listed", title="Targets checked per day", title_justify="left")
    for day in r.days:
        days.add_row(day.day, f"{day.checked:,}", f"{day.listed:,}")
    parts: list[RenderableType] = [title, summary, days]
    if r.recent_failures:
        failures = Table("when", "address", "check", "error", title="Latest failed checks", title_justify="left")
        for f in r.recent_failures:
            failures.add_row(_ms_time(f.ended_ms), f.address, f.check, f.error or "")
        parts.append(failures)
    return Group(*parts)


@probe_group.command("fleets")
@json_option
@pass_state
def fleets(state: CliState, as_json: bool) -> None:
    """The account's fleets: their checks, shape and schedule as their worker registered them."""
    from conveyor.prober.fleet import list_fleets

    found = list_fleets(state.connect())

    def table() -> RenderableType:
        if not found:
            return Text("No fleets yet. Add a target: conveyor probe targets add URL --fleet NAME", style="dim")
        out = Table("fleet", "checks", "shape", "schedule", "worker registered")
        for f in found:
            shape = "-" if f.shape is None else str(f.shape)
            out.add_row(f.fleet, ", ".join(f.checks), shape, f.schedule or "-", _ms_time(f.registered_ms))
        return out

    emit(as_json, [f.as_dict() for f in found], table)


@probe_group.command("worker", short_help="Run a fleet whose targets use the http check only.")
@click.option(
    "--messages", type=click.IntRange(0), default=19, show_default=True, help="Messages per round (0: one loop)."
)
@click.option(
    "--per-message", type=click.IntRange(1), default=5, show_default=True, help="Targets per message at most."
)
@click.option("--at-a-time", type=click.IntRange(1), default=3, show_default=True, help="Checks at once per message.")
@click.option("--schedule", default="*/5 * * * *", show_default=True, help="The rounds' cron (UTC); '' for none.")
@click.option("--lease", default="10m", show_default=True, help="How long a job may stay open before it is abandoned.")
@click.option(
    "--timeout", type=click.FloatRange(0, min_open=True), default=30.0, show_default=True, help="Seconds per check."
)
@click.option(
    "--ca-file", type=click.Path(exists=True, dir_okay=False), default=None, help="CAs to verify https targets with."
)
@click.option(
    "--min-cert-days",
    type=click.FloatRange(0),
    default=7.0,
    show_default=True,
    help="Fail certificates expiring sooner.",
)
@fleet_option
@pass_state
def worker(
    state: CliState,
    messages: int,
    per_message: int,
    at_a_time: int,
    schedule: str,
    lease: str,
    timeout: float,
    ca_file: str | None,
    min_cert_days: float,
    fleet_name: str,
) -> None:
    """Run the fleet's rounds (its cron, its fan-out consumer, its sweeper) until SIGINT/SIGTERM."""
    import conveyor
    from conveyor.cli.worker import configure_logging

    configure_logging("INFO", False)
    prober = conveyor.Prober(
        conveyor.App(state.connect()),
        fleet=fleet_name,
        messages=messages,
        per_message=per_message,
        at_a_time=at_a_time,
        schedule=schedule or None,
        lease=lease,
        timeout=timeout,
        verify=ca_file or True,
        min_cert_days=min_cert_days,
    )
    console(stderr=True).print(
        Text.assemble("Running fleet ", (prober.name, "bold cyan"), f" ({prober.shape}, schedule {schedule or 'none'})")
    )
    prober.app.run()
