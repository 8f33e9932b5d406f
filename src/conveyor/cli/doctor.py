"""``conveyor doctor``: check an embedded deployment's files and say, per queue, what to do."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import click
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from conveyor.cli.context import CliError, CliState, console, json_option, pass_state
from conveyor.cli.render import plural
from conveyor.client.connect import DEFAULT_URL, sqlite_directory
from conveyor.engine.sqlite.doctor import RESTORE_CATALOG, DoctorReport, QueueHealth, examine


def deployment_directory(url: str | None) -> Path:
    """The directory of an embedded deployment's URL (the CLI's ``--url``, else ``$CONVEYOR_URL``)."""
    directory = sqlite_directory(url)
    if directory is not None:
        return directory
    scheme = (url or os.environ.get("CONVEYOR_URL") or DEFAULT_URL).split("://")[0]
    raise CliError(
        f"doctor checks the files of an embedded deployment (sqlite:///path/to/dir), not {scheme}://; "
        "run it on the server's machine with the server's --url"
    )


@click.command("doctor", short_help="Check a deployment's files; say what is wrong and what to do.")
@click.option("--thorough", is_flag=True, help="Run SQLite's full integrity_check instead of quick_check.")
@json_option
@pass_state
def doctor(state: CliState, thorough: bool, as_json: bool) -> None:
    """Check the catalog, every queue's shard files, stray files and the catalog snapshot of an
    embedded deployment, without changing anything. Exits 1 when anything is wrong.

    \b
    conveyor doctor
    conveyor --url sqlite:///var/lib/conveyor doctor --json
    """
    directory = deployment_directory(state.url)
    if not (directory / "catalog.db").exists():
        raise CliError(f"no Conveyor deployment in {directory}: it has no catalog.db")
    report = examine(directory, thorough=thorough)
    if as_json:
        click.echo(json.dumps(report_json(report), indent=2, ensure_ascii=False))
    else:
        console().print(report_view(report))
    if not report.ok:
        click.get_current_context().exit(1)


def report_json(report: DoctorReport) -> dict[str, object]:
    data = asdict(report)
    data["ok"] = report.ok
    for queue, health in zip(data["queues"], report.queues, strict=True):
        queue["ok"] = not health.problems
        queue["advice"] = health.advice
    return data


def report_view(report: DoctorReport) -> RenderableType:
    parts: list[RenderableType] = [Text.assemble("Deployment ", (report.directory, "bold"))]
    for problem in report.catalog:
        parts.append(Text.assemble(("catalog: ", "bold red"), problem.problem))
        parts.append(Text(f"  what to do: {RESTORE_CATALOG}", style="yellow"))
    if report.queues:
        table = Table(title="Queues", title_justify="left")
        for column in ("account", "name", "shards", "backlog", "state"):
            table.add_column(column, justify="right" if column in ("shards", "backlog") else "left")
        for q in report.queues:
            state = Text("damaged", style="bold red") if q.problems else Text("ok", style="green")
            backlog = "-" if q.backlog is None else f"{q.backlog:,}"
            table.add_row(q.account_id or "-", Text(q.queue_name, style="bold cyan"), str(q.shards), backlog, state)
        parts.append(table)
    for q in report.queues:
        for problem in q.problems:
            parts.append(Text.assemble((f"{_named(q)}: ", "bold red"), problem.problem))
        if q.advice:
            parts.append(Text(f"  what to do: {q.advice}", style="yellow"))
    for problem in [*report.stray_files, *report.snapshot]:
        parts.append(Text.assemble((f"{problem.file}: ", "bold yellow"), problem.problem))
    for upgrade in report.upgrades:
        parts.append(
            Text(
                f"{upgrade.file}: schema version {upgrade.version}; opening the deployment upgrades it to "
                f"{upgrade.upgraded_to} (nothing to do)",
                style="dim",
            )
        )
    if report.kept_aside:
        parts.append(
            Text(f"kept aside for inspection: {plural(len(report.kept_aside), 'file')} in damaged/", style="dim")
        )
    parts.append(Text("All good." if report.ok else "Problems found.", style="green" if report.ok else "bold red"))
    return Group(*parts)


def _named(queue: QueueHealth) -> str:
    """The queue as its account knows it, with the account."""
    return (
        f"{queue.queue_name} (account {queue.account_id})" if queue.account_id else f"{queue.queue_name} (no account)"
    )
