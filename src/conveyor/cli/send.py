"""``conveyor send``: one message from the command line, every line of a file or stdin, or (with
``--whole``) the whole of a file or stdin as one message.

Lines go out in batches as large as the limits allow (100 messages, 256 KB), each batch atomic. A
bad line stops the run with an error that says which line, and how many lines before it were sent.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import click
from rich.text import Text

from conveyor import limits
from conveyor.cli.context import CliState, emit, json_option, pass_state
from conveyor.cli.progress import message_progress, rate_text
from conveyor.cli.render import plural
from conveyor.cli.shapes import metrics_json
from conveyor.client.sync import Queue
from conveyor.codec import CONTENT_TYPES, encode
from conveyor.errors import ConveyorError, InvalidMessage, MalformedJSON, MessageTooLarge
from conveyor.model import Metrics


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


@dataclass(frozen=True, slots=True)
class Chunk:
    """One batch of lines: the messages, the bytes read for them, and the number of its last line."""

    messages: list[dict[str, Any]]
    bytes_read: int
    last_line: int


def read_chunks(source: IO[bytes], content_type: str) -> Iterator[Chunk]:
    """The non-empty lines of ``source`` as messages, grouped into batches within the batch limits."""
    batch: list[dict[str, Any]] = []
    size = consumed = last = 0
    for number, line in enumerate(source, start=1):
        consumed += len(line)
        raw = line.rstrip(b"\r\n")
        if not raw.strip():
            continue
        body = parse_body(raw, content_type, f"line {number}")
        encoded = len(encode(body, content_type)[0])
        if encoded > limits.MAX_MESSAGE_BYTES:
            raise MessageTooLarge(f"line {number} is {encoded} bytes; the limit is {limits.MAX_MESSAGE_BYTES}")
        if batch and (len(batch) >= limits.MAX_BATCH_MESSAGES or size + encoded > limits.MAX_BATCH_BYTES):
            yield Chunk(batch, consumed - len(line), last)
            batch, size, consumed = [], 0, len(line)
        batch.append({"body": body, "content_type": content_type})
        size += encoded
        last = number
    if batch:
        yield Chunk(batch, consumed, last)


# A JSON document may shrink when it is stored compactly, so more than a message's limit is read;
# the send then checks the encoded size. A pipe may be endless: reading stops here.
WHOLE_READ_LIMIT = 8 * limits.MAX_MESSAGE_BYTES


def read_whole(source: IO[bytes]) -> bytes:
    """All of ``source`` (for ``--whole``), refused once it passes ``WHOLE_READ_LIMIT``."""
    raw = source.read(WHOLE_READ_LIMIT + 1)
    if len(raw) > WHOLE_READ_LIMIT:
        raise MessageTooLarge(
            f"the input is over {WHOLE_READ_LIMIT} bytes; a message's limit is {limits.MAX_MESSAGE_BYTES}"
        )
    return raw


def remaining_bytes(source: IO[bytes]) -> int | None:
    """Bytes left to read in ``source``; ``None`` for a pipe, whose length is unknown."""
    try:
        if not source.seekable():
            return None
        here = source.tell()
        end = source.seek(0, os.SEEK_END)
        source.seek(here)
        return end - here
    except OSError:
        return None


@dataclass
class BulkSend:
    """What a bulk send did."""

    sent: int = 0
    batches: int = 0
    last_line: int = 0
    seconds: float = 0.0
    metrics: Metrics | None = None


def send_lines(q: Queue, source: IO[bytes], content_type: str, delay: int | None, *, quiet: bool) -> BulkSend:
    done = BulkSend(metrics=q.metrics())
    started = time.perf_counter()
    with message_progress(quiet=quiet, by_bytes=True) as progress:
        task = progress.add_task(f"sending to {q.name}", total=remaining_bytes(source), rate="", sent=0)
        try:
            for chunk in read_chunks(source, content_type):
                done.metrics = q.send_batch(chunk.messages, delay_seconds=delay).metrics
                done.sent += len(chunk.messages)
                done.batches += 1
                done.last_line = chunk.last_line
                rate = rate_text(done.sent, time.perf_counter() - started)
                progress.update(task, advance=chunk.bytes_read, sent=done.sent, rate=rate)
        except ConveyorError as exc:
            if done.sent:
                # A script must know where to resume: say what was stored before the failure.
                verb = "was" if done.sent == 1 else "were"
                exc.message += f"; the {plural(done.sent, 'message')} up to line {done.last_line} {verb} sent"
            raise
    done.seconds = time.perf_counter() - started
    return done


@click.command("send", short_help="Send a message, or every line of a file or stdin.")
@click.argument("queue")
@click.argument("body", required=False)
@click.option(
    "--content-type",
    type=click.Choice(CONTENT_TYPES),
    default="json",
    show_default=True,
    help="How to read each body: json (parsed), text (as is) or bytes (raw).",
)
@click.option("--delay-secs", type=int, help="Seconds before the message(s) can be delivered.")
@click.option(
    "--file",
    "source",
    type=click.File("rb"),
    help="Send every non-empty line of FILE as one message ('-' reads stdin), in batches of up to 100.",
)
@click.option(
    "--whole",
    is_flag=True,
    help="Send the whole of --file (or stdin) as one message instead of one per line: a binary file with "
    "--content-type bytes, a JSON document spread over lines, a text with newlines.",
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
    whole: bool,
    as_json: bool,
) -> None:
    """Send BODY to QUEUE; without BODY, send each line of --file or of stdin as a message (or,
    with --whole, all of it as one).

    \b
    conveyor send emails '{"to": "a@b"}'
    conveyor send logs 'plain words' --content-type text
    conveyor send emails --file messages.jsonl
    conveyor send images --file photo.png --content-type bytes --whole
    """
    if body is not None and source is not None:
        raise click.UsageError("give either BODY or --file, not both")
    if body is not None and whole:
        raise click.UsageError("--whole sends a file or stdin as one message; BODY already is one")
    if body is None and source is None:
        if sys.stdin.isatty():
            raise click.UsageError("give a BODY, --file FILE, or pipe lines on stdin")
        source = sys.stdin.buffer
    q = state.connect().queue(queue)
    if source is None or whole:
        raw = read_whole(source) if source is not None else (body or "").encode()
        result = q.send(
            parse_body(raw, content_type, "BODY" if source is None else "the input"), content_type, delay_secs
        )
        emit(
            as_json,
            # The REST API's answer to a push.
            {"metadata": {"metrics": metrics_json(result.metrics)}, "message_ids": [result.id]},
            lambda: Text(f"Sent 1 message to {queue}: {result.id}"),
        )
        return
    done = send_lines(q, source, content_type, delay_secs, quiet=as_json)
    data = {
        "sent_count": done.sent,
        "batch_count": done.batches,
        "metadata": {"metrics": metrics_json(done.metrics or q.metrics())},
    }
    rate = rate_text(done.sent, done.seconds)
    emit(
        as_json,
        data,
        lambda: Text(
            f"Sent {plural(done.sent, 'message')} to {queue} in {plural(done.batches, 'batch')}"
            + (f" ({rate})" if rate else "")
        ),
    )
