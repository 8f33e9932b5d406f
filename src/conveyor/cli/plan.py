"""``conveyor plan``: predict a fan-out round of checks over a fleet, or search for its best shape.

It needs no deployment: it runs the simulator (:mod:`conveyor.sim`) on the fleet's figures.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Group
from rich.table import Table
from rich.text import Text

from conveyor.cli.context import CliState, console, json_option, pass_state
from conveyor.extras import require_extra
from conveyor.sim import CloudflareModel, ConveyorModel, measure_costs
from conveyor.sim.rounds import (
    SEARCH_MAX_AT_A_TIME,
    SEARCH_MAX_MESSAGES,
    TIE_FRACTION,
    Fleet,
    RoundPrediction,
    Shape,
    curve,
    predict_round,
    search_shapes,
)

SPARKS = " ▁▂▃▄▅▆▇█"
SPARK_WIDTH = 60
BAR_WIDTH = 40
RISK_STYLE = {"low": "green", "medium": "yellow", "high": "bold red"}


def _model(name: str, engine: str | None, measure: bool, state: CliState) -> CloudflareModel | ConveyorModel:
    if name == "cloudflare":
        if engine is not None or measure:
            raise click.UsageError(
                "--engine and --measure are for the conveyor model; the cloudflare model has neither"
            )
        return CloudflareModel()
    if measure:
        if engine is not None:
            raise click.UsageError("give --engine (preset costs) or --measure (the deployment's own), not both")
        return measure_costs(state.connect())
    return ConveyorModel.postgresql() if engine == "postgresql" else ConveyorModel.sqlite()


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if value < 100 else f"{value:,.0f} s"


def _margin(p: RoundPrediction) -> str:
    return "∞" if math.isinf(p.margin) else f"{p.margin:.1f}×"


def sparkline(steps: list[tuple[float, int]], until: float, width: int = SPARK_WIDTH) -> str:
    """``steps`` (a step curve from 0) over ``0 .. until`` in ``width`` characters, each the most
    running during its slice, scaled to the curve's peak."""
    peak = max((n for _, n in steps), default=0)
    if peak == 0 or until <= 0:
        return SPARKS[0] * width
    cells = []
    for cell in range(width):
        low, high = until * cell / width, until * (cell + 1) / width
        inside = [n for t, n in steps if low <= t < high]
        before = [n for t, n in steps if t < low]
        most = max(inside + before[-1:], default=0)
        cells.append(SPARKS[math.ceil(most / peak * (len(SPARKS) - 1))])
    return "".join(cells)


FILL_WORDS = {"spread": "servers dealt to the messages in turn", "pack": "servers packed into the first messages"}


def _fleet_line(p: RoundPrediction, model: CloudflareModel | ConveyorModel) -> Text:
    if isinstance(model, CloudflareModel):
        kind = "cloudflare (the fitted ramp)"
    else:
        costs = (
            f"{model.notice_seconds * 1000:.2g} / {model.lease_seconds * 1000:.2g} / {model.settle_seconds * 1000:.2g}"
        )
        kind = f"conveyor ({model.engine}; notice / step / settle {costs} ms)"
    fleet = p.fleet
    return Text.assemble(
        ("Fleet: ", "bold"),
        f"{fleet.servers} servers, {fleet.check_seconds:g} s a check, deadline {fleet.deadline:g} s after the mark, "
        f"{FILL_WORDS[p.fill]} · ",
        ("model: ", "bold"),
        kind,
    )


def _rounds_table(predictions: Sequence[RoundPrediction], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("shape", style="bold cyan", no_wrap=True)
    for name in ("round", "from mark", "peak", "checks at once", "late", "unchecked", "margin"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("risk", no_wrap=True)
    for p in predictions:
        table.add_row(
            str(p.shape),
            _seconds(p.round_seconds),
            _seconds(p.from_mark),
            str(p.peak),
            str(p.peak_checks),
            str(p.late),
            str(p.unchecked),
            _margin(p),
            Text(p.risk, style=RISK_STYLE[p.risk]),
        )
    return table


def _curves(p: RoundPrediction) -> Group:
    until = max(p.from_mark, p.simulation.makespan)
    return Group(
        Text(f"{p.shape}: running over the round, 0 → {_seconds(until)}", style="bold"),
        Text(f"  invocations {sparkline(p.simulation.concurrency(), until)}  peak {p.peak}"),
        Text(f"  checks      {sparkline(p.checks_curve(), until)}  peak {p.peak_checks}"),
    )


def _shapes_view(model: CloudflareModel | ConveyorModel, rounds: list[RoundPrediction]) -> Group:
    return Group(
        _fleet_line(rounds[0], model),
        _rounds_table(rounds, "Predicted rounds"),
        *(_curves(p) for p in rounds),
    )


def _search_view(model: CloudflareModel | ConveyorModel, ranked: list[RoundPrediction]) -> Group:
    best = ranked[0]
    points = curve(ranked)
    slowest = max(p.from_mark for p in points)
    table = Table(title="The fastest round for each number of messages", title_justify="left")
    table.add_column("messages", justify="right")
    table.add_column("shape", style="cyan", no_wrap=True)
    table.add_column("from mark", justify="right", no_wrap=True)
    table.add_column("risk", no_wrap=True)
    table.add_column("", no_wrap=True)
    for p in points:
        bar = "█" * max(1, round(p.from_mark / slowest * BAR_WIDTH))
        table.add_row(
            str(p.shape.messages),
            str(p.shape),
            _seconds(p.from_mark),
            Text(p.risk, style=RISK_STYLE[p.risk]),
            Text(bar, style="bold red" if p.shape == best.shape else "blue"),
        )
    headline = Text.assemble(
        ("Best shape: ", "bold"),
        (str(best.shape), "bold cyan"),
        f" — round {_seconds(best.round_seconds)} ({_seconds(best.from_mark)} from the mark), "
        f"peak {best.peak} invocations, {best.peak_checks} checks at once, risk ",
        (best.risk, RISK_STYLE[best.risk]),
    )
    rule = Text(
        f"{len(ranked)} shapes tried. Rounds within {TIE_FRACTION:.0%} of the fastest count as equally fast; "
        "then fewer checks at once, fewer messages and fewer at a time win.",
        style="dim",
    )
    return Group(
        _fleet_line(best, model),
        headline,
        rule,
        _rounds_table(ranked[:5], "The five best shapes"),
        table,
        _curves(best),
    )


@click.command("plan")
@click.option("--servers", type=int, required=True, help="Servers checked in a round.")
@click.option("--check-seconds", type=float, required=True, help="How long one check takes, in seconds.")
@click.option(
    "--deadline",
    type=float,
    default=300.0,
    show_default=True,
    help="Every server must be checked this many seconds after the round's mark (the cron's interval).",
)
@click.option(
    "--model",
    "model_name",
    type=click.Choice(["conveyor", "cloudflare"]),
    default="conveyor",
    show_default=True,
    help="Conveyor's own consumer, or Cloudflare's fitted ramp.",
)
@click.option(
    "--engine",
    type=click.Choice(["sqlite", "postgresql"]),
    default=None,
    help="The conveyor model's engine costs (default: sqlite).",
)
@click.option(
    "--measure",
    is_flag=True,
    help="Measure the conveyor model's costs on the deployment (--url): about a second on a scratch queue, "
    "deleted after.",
)
@click.option(
    "--shape",
    "shapes",
    multiple=True,
    metavar="MxPxA",
    help="messages × servers per message × checks at a time, e.g. 19x5x3; 0 for the single loop. Repeatable.",
)
@click.option(
    "--fill",
    type=click.Choice(["spread", "pack"]),
    default="spread",
    show_default=True,
    help="How servers are dealt to messages: one to each in turn (conveyor.prober's tick), or full shares "
    "first (invocations that claim their servers when they run).",
)
@click.option("--search", is_flag=True, help="Try every shape that covers the fleet and show the best.")
@click.option(
    "--max-messages", type=int, default=SEARCH_MAX_MESSAGES, show_default=True, help="The search's most messages."
)
@click.option(
    "--max-at-a-time", type=int, default=SEARCH_MAX_AT_A_TIME, show_default=True, help="The search's most at a time."
)
@click.option("--max-concurrency", type=int, default=None, help="The consumer's cap (default: automatic).")
@click.option(
    "--message-overhead",
    type=float,
    default=0.0,
    show_default=True,
    help="Seconds an invocation spends before its first check (its claim).",
)
@click.option(
    "--check-overhead", type=float, default=0.0, show_default=True, help="Seconds each check adds (recording it)."
)
@click.option("--plot", "plot_path", metavar="FILE.png", help="Also draw the curves into an image (the 'plot' extra).")
@json_option
@pass_state
def plan(
    state: CliState,
    servers: int,
    check_seconds: float,
    deadline: float,
    model_name: str,
    engine: str | None,
    measure: bool,
    shapes: tuple[str, ...],
    fill: str,
    search: bool,
    max_messages: int,
    max_at_a_time: int,
    max_concurrency: int | None,
    message_overhead: float,
    check_overhead: float,
    plot_path: str | None,
    as_json: bool,
) -> None:
    """Predict a fan-out round over a fleet: its time, peak concurrency and staleness risk.

    \b
    conveyor plan --servers 21 --check-seconds 0.55 --shape 0 --shape 19x5x3
    conveyor plan --servers 21 --check-seconds 5.5 --model cloudflare --search
    conveyor plan --servers 21 --check-seconds 0.55 --search --json
    conveyor plan --servers 21 --check-seconds 0.55 --shape 19x5x3 --plot round.png
    conveyor --url sqlite:///var/lib/conveyor plan --servers 21 --check-seconds 0.55 --search --measure

    A round sends MESSAGES messages at once; each invocation checks up to PER_MESSAGE servers,
    AT_A_TIME at once; --fill says how the servers are dealt to the messages. Risk: high when a
    server is checked after the deadline or left out, medium when a round less than twice as slow
    would be late, else low.
    """
    if search == bool(shapes):
        raise click.UsageError("give --shape (one or more) or --search")
    if plot_path is not None:
        require_extra("conveyor plan --plot", "plot", ("matplotlib",))
    fleet = Fleet(servers, check_seconds, deadline)
    model = _model(model_name, engine, measure, state)
    settings: dict[str, Any] = {
        "fill": fill,
        "max_concurrency": max_concurrency,
        "message_overhead": message_overhead,
        "check_overhead": check_overhead,
    }
    if search:
        ranked = search_shapes(fleet, model, max_messages=max_messages, max_at_a_time=max_at_a_time, **settings)
        _show_search(model, ranked, plot_path, as_json)
    else:
        rounds = [predict_round(fleet, Shape.parse(text), model, **settings) for text in shapes]
        _show_rounds(model, rounds, plot_path, as_json)


def _show_rounds(
    model: CloudflareModel | ConveyorModel,
    rounds: list[RoundPrediction],
    plot_path: str | None,
    as_json: bool,
) -> None:
    if as_json:
        for p in rounds:
            click.echo(json.dumps(p.to_json(), ensure_ascii=False))
    else:
        console().print(_shapes_view(model, rounds))
    if plot_path is not None:
        from conveyor.sim.plot import plot_rounds

        _wrote(plot_rounds(rounds, plot_path), as_json)


def _show_search(
    model: CloudflareModel | ConveyorModel,
    ranked: list[RoundPrediction],
    plot_path: str | None,
    as_json: bool,
) -> None:
    if as_json:
        for rank, p in enumerate(ranked, 1):
            line = p.to_json()
            for detail in ("starts", "ends", "servers_per_message"):
                del line[detail]
            click.echo(json.dumps({**line, "rank": rank, "best": rank == 1}, ensure_ascii=False))
    else:
        console().print(_search_view(model, ranked))
    if plot_path is not None:
        from conveyor.sim.plot import plot_search

        _wrote(plot_search(curve(ranked), ranked[0], plot_path), as_json)


def _wrote(path: Path, as_json: bool) -> None:
    """Say where the image went: on stderr under --json, so stdout stays JSON lines."""
    console(stderr=as_json).print(Text(f"Wrote {path}", style="dim"))
