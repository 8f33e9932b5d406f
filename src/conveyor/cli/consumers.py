"""``conveyor queues consumer ...``: register and remove a queue's consumer (worker or HTTP pull).

A queue has one consumer at a time. ``consumer add`` registers a push (``worker``) consumer in the
catalog under a script name; ``conveyor worker`` registers its own as it starts. ``consumer http add``
registers an ``http_pull`` consumer, which ``conveyor pull`` and HTTP clients pull from.
"""

from __future__ import annotations

import click
from rich.text import Text

from conveyor import limits
from conveyor.cli.context import CliState, ConveyorGroup, emit, json_option, pass_state, visibility_timeout_options
from conveyor.cli.render import consumers_table
from conveyor.cli.shapes import consumer_json
from conveyor.errors import InvalidSetting
from conveyor.model import ConsumerInfo, ConsumerSettings

batch_size_option = click.option(
    "--batch-size", type=int, help=f"Maximum messages per batch (1 to {limits.MAX_BATCH_SIZE})."
)
retries_option = click.option(
    "--message-retries",
    type=int,
    help=f"Retries of a message before it is dead-lettered or dropped (0 to {limits.MAX_RETRIES}; default "
    f"{limits.DEFAULT_MAX_RETRIES}).",
)
dlq_option = click.option(
    "--dead-letter-queue", help="Queue that receives messages whose retries are used up (created if missing)."
)
retry_delay_option = click.option(
    "--retry-delay-secs", type=int, default=0, show_default=True, help="Seconds before a retried message comes back."
)


@click.group("consumer", cls=ConveyorGroup, short_help="Manage a queue's consumer.")
def consumer_group() -> None:
    """Manage a queue's consumer: add, remove, list; `http add|remove` for HTTP pull consumers."""


def _consumer_line(verb: str, c: ConsumerInfo) -> Text:
    who = f"{c.type} consumer" + (f" {c.script_name}" if c.script_name else "")
    return Text.assemble(f"{verb} {who} on ", (c.queue_name, "bold cyan"), (f" ({c.consumer_id})", "dim"))


def _batch_timeout_ms(seconds: float | None) -> int:
    if seconds is None:
        return int(limits.DEFAULT_MAX_BATCH_TIMEOUT * 1000)
    if not 0 <= seconds <= limits.MAX_BATCH_TIMEOUT:
        raise InvalidSetting(f"batch timeout is {seconds:g} s; it must be from 0 to {limits.MAX_BATCH_TIMEOUT:g} s")
    return round(seconds * 1000)


@consumer_group.command("add", short_help="Register a push (worker) consumer.")
@click.argument("queue")
@click.argument("script")
@batch_size_option
@click.option(
    "--batch-timeout",
    type=float,
    help=f"Seconds to wait for a batch to fill before delivering it (0 to {limits.MAX_BATCH_TIMEOUT:g}; "
    f"default {limits.DEFAULT_MAX_BATCH_TIMEOUT:g}).",
)
@retries_option
@dlq_option
@click.option(
    "--max-concurrency",
    type=int,
    help=f"Most batches handled at once (1 to {limits.MAX_CONCURRENCY}); default automatic.",
)
@retry_delay_option
@json_option
@pass_state
def add(
    state: CliState,
    queue: str,
    script: str,
    batch_size: int | None,
    batch_timeout: float | None,
    message_retries: int | None,
    dead_letter_queue: str | None,
    max_concurrency: int | None,
    retry_delay_secs: int,
    as_json: bool,
) -> None:
    """Register SCRIPT as the push consumer of QUEUE: the handler as `module:function` (for example
    `myapp.consumers:handle`), or a Worker's name as wrangler registers one."""
    settings = ConsumerSettings(
        batch_size=limits.DEFAULT_MAX_BATCH_SIZE if batch_size is None else batch_size,
        max_retries=limits.DEFAULT_MAX_RETRIES if message_retries is None else message_retries,
        max_wait_time_ms=_batch_timeout_ms(batch_timeout),
        max_concurrency=max_concurrency,
        retry_delay=retry_delay_secs,
    )
    consumer = (
        state.connect()
        .queue(queue)
        .add_consumer("worker", script_name=script, settings=settings, dead_letter_queue=dead_letter_queue)
    )
    emit(as_json, consumer_json(consumer), lambda: _consumer_line("Added", consumer))


@consumer_group.command("remove")
@click.argument("queue")
@click.argument("script")
@json_option
@pass_state
def remove(state: CliState, queue: str, script: str, as_json: bool) -> None:
    """Remove the push consumer SCRIPT from QUEUE."""
    gone = state.connect().queue(queue).remove_consumer(type="worker", script_name=script)
    emit(as_json, consumer_json(gone) | {"deleted": True}, lambda: _consumer_line("Removed", gone))


@consumer_group.command("list")
@click.argument("queue")
@json_option
@pass_state
def list_(state: CliState, queue: str, as_json: bool) -> None:
    """List the consumers of QUEUE (at most one)."""
    consumers = state.connect().queue(queue).info().consumers
    emit(as_json, [consumer_json(c) for c in consumers], lambda: consumers_table(consumers))


@consumer_group.group("http", cls=ConveyorGroup)
def http_group() -> None:
    """Manage a queue's HTTP pull consumer."""


@http_group.command("add")
@click.argument("queue")
@batch_size_option
@retries_option
@dlq_option
@visibility_timeout_options(
    "How long a pulled message stays leased, waiting for an ack, before it is delivered again",
    f"{limits.DEFAULT_VISIBILITY_TIMEOUT_MS // 1000} s",
)
@retry_delay_option
@json_option
@pass_state
def http_add(
    state: CliState,
    queue: str,
    batch_size: int | None,
    message_retries: int | None,
    dead_letter_queue: str | None,
    visibility_timeout_ms: int | None,
    retry_delay_secs: int,
    as_json: bool,
) -> None:
    """Register an HTTP pull consumer on QUEUE, so clients can pull and ack its messages."""
    consumer = (
        state.connect()
        .queue(queue)
        .add_pull_consumer(
            batch_size=limits.DEFAULT_PULL_BATCH_SIZE if batch_size is None else batch_size,
            max_retries=limits.DEFAULT_MAX_RETRIES if message_retries is None else message_retries,
            dead_letter_queue=dead_letter_queue,
            visibility_timeout_ms=(
                limits.DEFAULT_VISIBILITY_TIMEOUT_MS if visibility_timeout_ms is None else visibility_timeout_ms
            ),
            retry_delay=retry_delay_secs,
        )
    )
    emit(as_json, consumer_json(consumer), lambda: _consumer_line("Added", consumer))


@http_group.command("remove")
@click.argument("queue")
@json_option
@pass_state
def http_remove(state: CliState, queue: str, as_json: bool) -> None:
    """Remove the HTTP pull consumer of QUEUE."""
    gone = state.connect().queue(queue).remove_consumer(type="http_pull")
    emit(as_json, consumer_json(gone) | {"deleted": True}, lambda: _consumer_line("Removed", gone))
