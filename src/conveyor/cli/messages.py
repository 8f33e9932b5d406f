"""Reading and moving messages from the shell: ``pull``, ``ack``, ``peek`` and ``redrive``."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import click
from rich.text import Text

from conveyor.cli.context import CliState, emit, json_option, pass_state, visibility_timeout_options
from conveyor.cli.progress import message_progress, rate_text
from conveyor.cli.render import messages_table, plural
from conveyor.cli.shapes import message_json
from conveyor.client.sync import Queue
from conveyor.errors import InvalidRequest


@click.command("pull", short_help="Lease a batch of messages (HTTP pull consumer).")
@click.argument("queue")
@click.option("--batch-size", type=int, help="Most messages to lease (default: the consumer's batch size).")
@visibility_timeout_options("How long the messages stay leased before they are delivered again", "the consumer's")
@click.option("--ack", is_flag=True, help="Acknowledge the pulled messages at once (they are deleted).")
@json_option
@pass_state
def pull(
    state: CliState, queue: str, batch_size: int | None, visibility_timeout_ms: int | None, ack: bool, as_json: bool
) -> None:
    """Lease a batch of messages from QUEUE, which needs an HTTP pull consumer
    (`conveyor queues consumer http add QUEUE`). Without --ack, settle them later with `conveyor ack`."""
    q = state.connect().queue(queue)
    consumer = q.consumer()
    if consumer is None or consumer.type != "http_pull":
        # The API's message names the Python call; on the command line, name the command.
        raise InvalidRequest(
            f"queue {queue!r} has no HTTP pull consumer; add one: conveyor queues consumer http add {queue}"
        )
    messages = q.pull(batch_size=batch_size, visibility_timeout_ms=visibility_timeout_ms)
    data: dict[str, Any] = {
        "message_backlog_count": q.metrics().backlog_count,
        "messages": [message_json(m) for m in messages],
    }
    if ack and messages:
        result = q.ack(acks=[m.lease_id for m in messages])
        data["ack"] = {"ackCount": result.ack_count, "retryCount": result.retry_count, "warnings": result.warnings}
    title = f"Pulled {plural(len(messages), 'message')} from {queue}" + (" (acked)" if ack else "")
    emit(as_json, data, lambda: messages_table(messages, title, show_lease=not ack))


@click.command("ack", short_help="Ack or retry pulled messages by lease id.")
@click.argument("queue")
@click.argument("lease_ids", nargs=-1)
@click.option("--retry", "retries", multiple=True, help="A lease id to retry instead of ack (repeatable).")
@click.option("--delay-secs", type=int, help="Seconds before retried messages come back (default: the consumer's).")
@json_option
@pass_state
def ack(
    state: CliState,
    queue: str,
    lease_ids: tuple[str, ...],
    retries: tuple[str, ...],
    delay_secs: int | None,
    as_json: bool,
) -> None:
    """Acknowledge pulled messages of QUEUE by LEASE_IDS (and retry those given with --retry)."""
    if not lease_ids and not retries:
        raise click.UsageError("give at least one lease id to ack, or --retry LEASE_ID")
    result = state.connect().queue(queue).ack(acks=lease_ids, retries=[(lid, delay_secs) for lid in retries])
    data = {"ackCount": result.ack_count, "retryCount": result.retry_count, "warnings": result.warnings}

    def human() -> Text:
        text = Text(f"Acked {result.ack_count}, retried {result.retry_count}")
        for lid, warning in result.warnings.items():
            text.append(f"\nwarning: {lid}: {warning}", style="yellow")
        return text

    emit(as_json, data, human)


@click.command("peek", short_help="Show messages without leasing them.")
@click.argument("queue")
@click.option("--batch-size", type=int, default=10, show_default=True, help="Most messages to show.")
@json_option
@pass_state
def peek(state: CliState, queue: str, batch_size: int, as_json: bool) -> None:
    """Show messages of QUEUE without leasing or changing them."""
    messages = state.connect().queue(queue).peek(batch_size=batch_size)
    emit(as_json, {"messages": [message_json(m) for m in messages]}, lambda: messages_table(messages, queue, False))


@click.command("redrive", short_help="Move a dead letter queue's messages back.")
@click.argument("dead_letter_queue")
@click.option("--to", "target", required=True, help="The queue to move the messages back to.")
@json_option
@pass_state
def redrive(state: CliState, dead_letter_queue: str, target: str, as_json: bool) -> None:
    """Move every message of DEAD_LETTER_QUEUE to another queue (attempts start again at 1)."""
    cv = state.connect()
    dlq = cv.queue(dead_letter_queue)
    cv.queue(target)  # fail on a missing target before showing any progress
    moved = run_redrive(dlq, target, quiet=as_json)
    data = {"queue_name": dead_letter_queue, "to": target, "redriven_count": moved}
    emit(as_json, data, lambda: Text(f"Redrove {plural(moved, 'message')} from {dead_letter_queue} to {target}"))


def run_redrive(dlq: Queue, target: str, *, quiet: bool) -> int:
    """Redrive with a progress bar that follows the dead letter queue's shrinking backlog."""
    total = dlq.metrics().backlog_count
    started = time.perf_counter()
    with ThreadPoolExecutor(1, thread_name_prefix="conveyor-redrive") as pool, message_progress(quiet=quiet) as bar:
        task = bar.add_task(f"redriving to {target}", total=total, rate="")
        moving = pool.submit(dlq.redrive, to=target)
        while not wait([moving], timeout=0.05).done:
            done = max(0, total - dlq.metrics().backlog_count)
            bar.update(task, completed=done, rate=rate_text(done, time.perf_counter() - started))
        bar.update(task, completed=total)
        return moving.result()
