"""The ``conveyor`` command's root: the global ``--url`` option and the command tree."""

from __future__ import annotations

import click

from conveyor.cli.context import CliState, ConveyorGroup
from conveyor.cli.demo import demo
from conveyor.cli.messages import ack, peek, pull, redrive
from conveyor.cli.migrate import migrate
from conveyor.cli.queues import queues_group
from conveyor.cli.send import send
from conveyor.cli.server_commands import COMMANDS as SERVER_COMMANDS
from conveyor.cli.worker import worker
from conveyor.cli.workers import workers_group


@click.group(cls=ConveyorGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar="CONVEYOR_URL",
    metavar="URL",
    help="The deployment: sqlite:///path/to/dir, postgresql://host/db or http(s)://server "
    "(default: SQLite in ./.conveyor/). Env: CONVEYOR_URL.",
)
@click.option(
    "--token", envvar="CONVEYOR_TOKEN", metavar="TOKEN", help="API token for an http(s) URL. Env: CONVEYOR_TOKEN."
)
@click.option(
    "--account-id",
    envvar="CONVEYOR_ACCOUNT_ID",
    metavar="ID",
    help="Account for an http(s) URL. Env: CONVEYOR_ACCOUNT_ID.",
)
@click.version_option(package_name="conveyor", prog_name="conveyor")
@click.pass_context
def cli(ctx: click.Context, url: str | None, token: str | None, account_id: str | None) -> None:
    """Conveyor: durable message queues with Cloudflare Queues' semantics.

    \b
    conveyor queues create emails
    conveyor send emails '{"to": "a@b"}'
    conveyor worker myapp:app
    conveyor demo

    Every command takes --json for machine-readable output.
    """
    ctx.obj = CliState(url, token, account_id)


for command in (queues_group, send, pull, ack, peek, redrive, worker, workers_group, demo, migrate, *SERVER_COMMANDS):
    cli.add_command(command)


def main() -> None:
    """The console script's entry point."""
    cli(prog_name="conveyor")
