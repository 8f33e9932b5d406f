"""``conveyor queues ...``: create, list, inspect, change, pause, purge and delete queues."""

from __future__ import annotations

import click
from rich.text import Text

from conveyor import limits
from conveyor.cli.consumers import consumer_group
from conveyor.cli.context import CliError, CliState, ConveyorGroup, emit, json_option, pass_state
from conveyor.cli.render import history_table, plural, queue_panel, queues_table
from conveyor.cli.shapes import counters_json, metrics_json, queue_json
from conveyor.cli.workers import unserved
from conveyor.client.history import queue_history
from conveyor.errors import StorageError
from conveyor.model import QueueInfo


@click.group("queues", cls=ConveyorGroup, short_help="Manage queues and their consumers.")
def queues_group() -> None:
    """Manage queues: create, list, info, update, delete, pause-delivery, resume-delivery, purge,
    and their consumers."""


def _changed(verb: str, info: QueueInfo) -> Text:
    return Text.assemble(f"{verb} queue ", (info.queue_name, "bold cyan"), (f" ({info.queue_id})", "dim"))


@queues_group.command("create", short_help="Create a queue.")
@click.argument("name")
@click.option(
    "--delivery-delay-secs",
    type=int,
    default=0,
    show_default=True,
    help=f"Seconds every message waits before it can be delivered (0 to {limits.MAX_DELAY_SECONDS}).",
)
@click.option(
    "--message-retention-period-secs",
    type=int,
    default=limits.DEFAULT_RETENTION_SECONDS,
    show_default=True,
    help=f"Seconds a message is kept before it expires "
    f"({limits.MIN_RETENTION_SECONDS} to {limits.MAX_RETENTION_SECONDS}).",
)
@click.option(
    "--shards",
    type=int,
    default=1,
    show_default=True,
    help="Storage shards to start with; the coordinator adds more under write load.",
)
@json_option
@pass_state
def create(
    state: CliState, name: str, delivery_delay_secs: int, message_retention_period_secs: int, shards: int, as_json: bool
) -> None:
    """Create the queue NAME (lowercase letters, digits and hyphens)."""
    q = state.connect().create_queue(
        name,
        delivery_delay=delivery_delay_secs,
        message_retention_period=message_retention_period_secs,
        shards=shards,
    )
    info = q.info()
    emit(as_json, queue_json(info), lambda: _changed("Created", info))


@queues_group.command("list")
@json_option
@pass_state
def list_(state: CliState, as_json: bool) -> None:
    """List every queue with its backlog and consumer."""
    cv = state.connect()
    queues = cv.list_queues()
    # Backlogs only for the table: the JSON is the queue objects, as the REST API lists them (with
    # a `storage_error` on a damaged one, whose backlog cannot be read).
    emit(
        as_json,
        [queue_json(q) for q in queues],
        lambda: queues_table(
            queues, [None if q.storage_error else cv.queue_by_id(q.queue_id).metrics() for q in queues]
        ),
    )


@queues_group.command("info", short_help="Show a queue: settings, consumer, backlog.")
@click.argument("name")
@click.option("--history", is_flag=True, help="Show the figures the coordinator recorded (every 10 s) instead.")
@click.option(
    "--minutes",
    type=click.IntRange(min=1, max=7 * 24 * 60),
    default=60,
    show_default=True,
    help="With --history: how far back.",
)
@json_option
@pass_state
def info(state: CliState, name: str, history: bool, minutes: int, as_json: bool) -> None:
    """Show the queue NAME: settings, consumer, backlog and lifetime counters; with --history, its
    backlog, oldest message age, in flight, rates and concurrency over the last --minutes."""
    cv = state.connect()
    q = cv.queue(name)
    if history:
        rows = queue_history(cv, name, minutes)
        emit(as_json, {"queue_name": name, "history": rows}, lambda: history_table(name, rows))
        return
    queue, metrics, counters = q.info(), q.metrics(), q.counters()
    missing = unserved([queue], cv.engine.list_workers())
    data = queue_json(queue) | {
        "metrics": metrics_json(metrics),
        "counters": counters_json(counters),
        "unserved": missing,
    }
    emit(as_json, data, lambda: queue_panel(queue, metrics, counters, unserved=bool(missing)))


@queues_group.command("update", short_help="Change a queue's settings.")
@click.argument("name")
@click.option("--delivery-delay-secs", type=int, help="New delivery delay in seconds.")
@click.option("--message-retention-period-secs", type=int, help="New retention period in seconds.")
@json_option
@pass_state
def update(
    state: CliState,
    name: str,
    delivery_delay_secs: int | None,
    message_retention_period_secs: int | None,
    as_json: bool,
) -> None:
    """Change settings of the queue NAME; the settings not given keep their values."""
    if delivery_delay_secs is None and message_retention_period_secs is None:
        raise click.UsageError("nothing to update: give --delivery-delay-secs and/or --message-retention-period-secs")
    queue = state.connect().queue(name)
    updated = queue.update(delivery_delay=delivery_delay_secs, message_retention_period=message_retention_period_secs)
    emit(as_json, queue_json(updated), lambda: _changed("Updated", updated))


@queues_group.command("delete", short_help="Delete a queue and its messages.")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation when the queue holds messages.")
@click.option(
    "--force",
    is_flag=True,
    help="Delete a queue whose storage is damaged too; its damaged files are kept aside for inspection.",
)
@json_option
@pass_state
def delete(state: CliState, name: str, yes: bool, force: bool, as_json: bool) -> None:
    """Delete the queue NAME with its consumer and every message in it.

    A queue that holds messages asks you to type its name to confirm, unless --yes is given. A
    queue with damaged storage is refused unless --force is given; then its damaged files are
    moved to damaged/ in the deployment directory, and the command says where.
    """
    queue = state.connect().queue(name)
    gone = queue.info()
    try:
        backlog: int | None = queue.metrics().backlog_count
    except StorageError:
        backlog = None  # damaged: the delete itself refuses it without --force
    if not yes and (backlog or (backlog is None and force)):
        what = f"holds {plural(backlog, 'message')}" if backlog else "has damaged storage"
        _confirm("delete", name, f"Queue {name} {what}; deleting it is for good.")
    kept_aside = queue.delete(force=force)
    emit(
        as_json,
        {"deleted": True, "queue_id": gone.queue_id, "queue_name": gone.queue_name, "kept_aside": kept_aside},
        lambda: _deleted(gone, kept_aside),
    )


def _deleted(gone: QueueInfo, kept_aside: list[str]) -> Text:
    if not kept_aside:
        return _changed("Deleted", gone)
    return Text.assemble(_changed("Deleted", gone), "; its damaged files are kept in ", ", ".join(kept_aside))


def _confirm(verb: str, name: str, warning: str) -> None:
    """Ask the user to type the queue's name; anything else aborts the command."""
    typed = click.prompt(f"{warning} Type the queue name to proceed", default="", show_default=False, err=True)
    if typed != name:
        raise CliError(f"{verb} aborted: you typed {typed!r}, not {name!r}")


@queues_group.command("pause-delivery", short_help="Stop delivery (sends are still accepted).")
@click.argument("name")
@json_option
@pass_state
def pause_delivery(state: CliState, name: str, as_json: bool) -> None:
    """Stop delivering messages of the queue NAME (sends are still accepted)."""
    updated = state.connect().queue(name).pause_delivery()
    emit(as_json, queue_json(updated), lambda: _changed("Paused delivery of", updated))


@queues_group.command("resume-delivery")
@click.argument("name")
@json_option
@pass_state
def resume_delivery(state: CliState, name: str, as_json: bool) -> None:
    """Resume delivering messages of the queue NAME."""
    updated = state.connect().queue(name).resume_delivery()
    emit(as_json, queue_json(updated), lambda: _changed("Resumed delivery of", updated))


@queues_group.command("purge", short_help="Delete every message of a queue.")
@click.argument("name")
@click.option("--force", is_flag=True, help="Do not ask for confirmation.")
@json_option
@pass_state
def purge(state: CliState, name: str, force: bool, as_json: bool) -> None:
    """Permanently delete every message of the queue NAME, delayed and in-flight ones included.

    Asks you to type the queue's name to confirm, unless --force is given.
    """
    queue = state.connect().queue(name)
    if not force:
        _confirm("purge", name, f"This permanently deletes every message in queue {name}.")
    count = queue.purge()
    info = queue.info()
    emit(
        as_json,
        queue_json(info) | {"purged_count": count},
        lambda: Text.assemble(_changed("Purged", info), f": {plural(count, 'message')} deleted"),
    )


queues_group.add_command(consumer_group)
