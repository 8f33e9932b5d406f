"""The ``conveyor`` command's root: the global ``--url`` option and the command tree."""

from __future__ import annotations

import click

from conveyor.allocator import keep_freed_memory
from conveyor.cli.cdn import cdn_group
from conveyor.cli.context import CliError, CliState, ConveyorGroup
from conveyor.cli.demo import demo
from conveyor.cli.doctor import doctor
from conveyor.cli.kv import kv_group
from conveyor.cli.messages import ack, peek, pull, redrive
from conveyor.cli.migrate import migrate
from conveyor.cli.plan import plan
from conveyor.cli.probe import probe_group
from conveyor.cli.queues import queues_group
from conveyor.cli.r2 import r2_group
from conveyor.cli.send import send
from conveyor.cli.slurper import slurper_group
from conveyor.cli.trace import trace
from conveyor.cli.worker import worker
from conveyor.cli.workers import workers_group
from conveyor.cli.workflows import workflows_group
from conveyor.engine.accounts import LOCAL_ACCOUNT
from conveyor.extras import MissingExtra


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
    "--account",
    "--account-id",
    "account_id",
    envvar="CONVEYOR_ACCOUNT_ID",
    metavar="ID",
    default=LOCAL_ACCOUNT,
    show_default=True,
    help="The account whose queues the commands see, on every kind of URL (on a server, the one the "
    "token is for). Env: CONVEYOR_ACCOUNT_ID.",
)
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON, as every command's --json.")
@click.version_option(package_name="conveyor", prog_name="conveyor")
@click.pass_context
def cli(ctx: click.Context, url: str | None, token: str | None, account_id: str, as_json: bool) -> None:
    """Conveyor: durable message queues with Cloudflare Queues' semantics.

    \b
    conveyor queues create emails
    conveyor send emails '{"to": "a@b"}'
    conveyor worker myapp:app
    conveyor demo

    Every command takes --json for machine-readable output (before or after the command's name).
    Queues belong to an account: `local` unless --account says otherwise, for the command line,
    for conveyor.connect() and for a `conveyor serve` of the same directory alike.
    """
    keep_freed_memory()  # a Conveyor process: batches allocate and free ~100 KB each (conveyor.allocator)
    ctx.obj = CliState(url, token, account_id, as_json)


def needs_extra(name: str, extra: str) -> click.Command:
    """A stand-in for a command whose extra is not installed: it says which one, whatever it is given."""

    def refuse() -> None:
        raise CliError(f"conveyor {name} needs the {extra!r} extra: pip install 'conveyor[{extra}]'")

    return click.Command(
        name,
        callback=refuse,
        help=f"(needs the {extra!r} extra: pip install 'conveyor[{extra}]')",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    )


def server_commands() -> tuple[click.Command, ...]:
    """``conveyor serve`` and ``conveyor tokens``, or their stand-ins where the server extra is missing."""
    try:
        from conveyor.cli.server_commands import COMMANDS
    except MissingExtra as missing:
        return (needs_extra("serve", missing.extra), needs_extra("tokens", missing.extra))
    return COMMANDS


COMMANDS = (
    queues_group,
    send,
    pull,
    ack,
    peek,
    redrive,
    worker,
    workers_group,
    demo,
    migrate,
    doctor,
    r2_group,
    kv_group,
    trace,
    workflows_group,
    slurper_group,
    probe_group,
    cdn_group,
    plan,
)
for command in (*COMMANDS, *server_commands()):
    cli.add_command(command)


def main() -> None:
    """The console script's entry point."""
    cli(prog_name="conveyor")
