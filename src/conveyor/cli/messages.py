"""Producing and consuming from the shell: ``send``, ``pull``, ``ack``, ``peek`` and ``redrive``."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from typing import IO, Any

import click
from rich.text import Text

from conveyor import limits
from conveyor.cli.context import CliState, emit, json_option, pass_state
from conveyor.cli.progress import message_progress, rate_text
from conveyor.cli.render import messages_table
from conveyor.cli.shapes import message_json, metrics_json
from conveyor.client.sync import Queue
from conveyor.codec import CONTENT_TYPES, encode
from conveyor.errors import InvalidMessage, InvalidRequest, MalformedJSON
from conveyor.model import Metrics

content_type_option = click.option(
    "--content-type",
    type=click.Choice(CONTENT_TYPES),
    default="json",
    show_default=True,
    help="How to read each body: json (parsed), text (as is) or bytes (raw).",
)


def parse_body(raw: bytes, content_type: str, where: str) -> Any:
    """The Python value of one body typed on the command line or read from a line."""
    if content_type == "bytes":
        return raw
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise InvalidMessage(f"{where} is not UTF-8 text; send it with --content-type bytes") from None
    if content_type == "text":
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedJSON(
            f"{where} is not valid JSON ({exc.msg} at column {exc.colno}); send it as text with --content-type text"
        ) from None


def read_batches(source: IO[bytes], content_type: str) -> Iterator[tuple[list[dict[str, Any]], int]]:
    """Batches of the non-empty lines of ``source`` within the batch limits, each with the bytes it read."""
    batch: list[dict[str, Any]] = []
    size = consumed = 0
    for number, line in enumerate(source, start=1):
        consumed += len(line)
        raw = line.rstrip(b"\r\n")
        if not raw.strip():
            continue
        body = parse_body(raw, content_type, f"line {number}")
        encoded = len(encode(body, content_type)[0])
        full = len(batch) >= limits.MAX_BATCH_MESSAGES or size + encoded > limits.MAX_BATCH_BYTES
        if batch and full:
            yield batch, consumed - len(line)
            batch, size, consumed = [], 0, len(line)
        batch.append({"body": body, "content_type": content_type})
        size += encoded
    if batch:
        yield batch, consumed


def _source_size(source: IO[bytes]) -> int | None:
    try:
        return source.seek(0, 2) - source.seek(0) if source.seekable() else None
    except OSError:
        return None


@click.command("send", short_help="Send a message, or every line of a file or stdin.")
@click.argument("queue")
@click.argument("body", required=False)
@content_type_option
@click.option("--delay-secs", type=int, help="Seconds before the message(s) can be delivered.")
@click.option(
    "--file",
    "source",
    type=click.File("rb"),
    help="Send every non-empty line of FILE as one message ('-' reads stdin), in batches of up to 100.",
)
@json_option
@pass_state
def send(
    state: CliState,
    queue: str,
    body: str | None,
    content_type: str,
    delay_secs: int | None,
    source: IO[bytes] | None,
    as_json: bool,
) -> None:
    """Send BODY to QUEUE; without BODY, send each line of --file or of stdin as a message.

    \b
    conveyor send emails '{"to": "a@b"}'
    conveyor send logs 'plain words' --content-type text
    conveyor send emails --file messages.jsonl
    """
    q = state.connect().queue(queue)
    if body is not None:
        if source is not None:
            raise click.UsageError("give either BODY or --file, not both")
        metrics = q.send(parse_body(body.encode(), content_type, "BODY"), content_type, delay_secs)
        emit(as_json, {"metadata": {"metrics": metrics_json(metrics)}}, lambda: Text(f"Sent 1 message to {queue}"))
        return
    if source is None:
        if sys.stdin.isatty():
            raise click.UsageError("give a BODY, --file FILE, or pipe lines on stdin")
        source = sys.stdin.buffer
    sent, batches, seconds, metrics = _send_lines(q, source, content_type, delay_secs, as_json)
    data = {"sent_count": sent, "batch_count": batches, "metadata": {"metrics": metrics_json(metrics)}}
    emit(
        as_json,
        data,
        lambda: Text(
            f"Sent {sent:,} messages to {queue} in {batches:,} batch{'es' if batches != 1 else ''}"
            + (f" ({rate})" if (rate := rate_text(sent, seconds)) else "")
        ),
    )


def _send_lines(
    q: Queue, source: IO[bytes], content_type: str, delay: int | None, quiet: bool
) -> tuple[int, int, float, Metrics]:
    total = _source_size(source)
    sent = batches = 0
    metrics = q.metrics()
    started = time.perf_counter()
    with message_progress(quiet=quiet, by_bytes=True) as progress:
        task = progress.add_task(f"sending to {q.name}", total=total, rate="", sent=0)
        for batch, read in read_batches(source, content_type):
            metrics = q.send_batch(batch, delay_seconds=delay)
            sent += len(batch)
            batches += 1
            progress.update(task, advance=read, sent=sent, rate=rate_text(sent, time.perf_counter() - started))
    return sent, batches, time.perf_counter() - started, metrics


@click.command("pull", short_help="Lease a batch of messages (HTTP pull consumer).")
@click.argument("queue")
@click.option("--batch-size", type=int, help="Most messages to lease (default: the consumer's batch size).")
@click.option(
    "--visibility-timeout-ms",
    type=int,
    help="How long the messages stay leased before they are delivered again (default: the consumer's).",
)
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
    title = f"Pulled {len(messages)} from {queue}" + (" (acked)" if ack else "")
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
    moved, seconds = run_redrive(dlq, target, quiet=as_json)
    data = {"queue_name": dead_letter_queue, "to": target, "redriven_count": moved}
    emit(
        as_json,
        data,
        lambda: Text(f"Redrove {moved:,} messages from {dead_letter_queue} to {target} ({rate_text(moved, seconds)})"),
    )


def run_redrive(dlq: Queue, target: str, *, quiet: bool) -> tuple[int, float]:
    """Redrive with a progress bar (the DLQ's shrinking backlog); returns (moved, seconds)."""
    total = dlq.metrics().backlog_count
    outcome: list[int] = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            outcome.append(dlq.redrive(to=target))
        except BaseException as exc:  # handed to the main thread, which raises it
            failure.append(exc)

    started = time.perf_counter()
    thread = threading.Thread(target=work, name="conveyor-redrive", daemon=True)
    with message_progress(quiet=quiet) as progress:
        task = progress.add_task(f"redriving to {target}", total=total, rate="")
        thread.start()
        while thread.is_alive():
            thread.join(0.05)
            done = max(0, total - dlq.metrics().backlog_count)
            progress.update(task, completed=done, rate=rate_text(done, time.perf_counter() - started))
        progress.update(task, completed=total)
    if failure:
        raise failure[0]
    return outcome[0], time.perf_counter() - started
