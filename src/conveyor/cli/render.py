"""Tables for people: queues, consumers and messages as rich renderables."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from conveyor.model import ConsumerInfo, Counters, Metrics, PulledMessage, QueueInfo

BODY_PREVIEW_CHARS = 60


def plural(count: int, noun: str) -> str:
    """``1 message``, ``2,000 messages``; ``batch`` becomes ``batches``."""
    if count == 1:
        return f"1 {noun}"
    return f"{count:,} {noun}{'es' if noun.endswith(('s', 'ch')) else 's'}"


def _when(iso: str) -> str:
    """An ISO-8601 time without sub-seconds, for a narrow column."""
    return iso.split(".")[0].replace("T", " ").removesuffix("Z")


def _ms_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if ms else "-"


def _sent(ms: int) -> str:
    """A message's send time, short: it sits in a table row beside a 32-character id."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S.%f")[:-3]


def _consumer_label(c: ConsumerInfo) -> str:
    return f"{c.type} {c.script_name}" if c.script_name else c.type


def queues_table(queues: Sequence[QueueInfo], metrics: Sequence[Metrics | None]) -> RenderableType:
    """The queues, one row each; a queue with damaged storage (no metrics) shows "damaged" and its
    error below the table."""
    if not queues:
        return Text("No queues yet. Create one: conveyor queues create NAME", style="dim")
    table = Table(title="Queues", title_justify="left")
    table.add_column("name", style="bold cyan", no_wrap=True)
    table.add_column("id", style="dim", overflow="fold")
    table.add_column("backlog", justify="right")
    table.add_column("consumer")
    table.add_column("delivery")
    table.add_column("created", no_wrap=True)
    for q, m in zip(queues, metrics, strict=True):
        table.add_row(
            q.queue_name,
            q.queue_id,
            f"{m.backlog_count:,}" if m is not None else Text("damaged", style="bold red"),
            ", ".join(_consumer_label(c) for c in q.consumers) or "-",
            Text("paused", style="yellow") if q.settings.delivery_paused else Text("active", style="green"),
            _when(q.created_on),
        )
    damaged = [Text.assemble((q.queue_name, "bold red"), f": {q.storage_error}") for q in queues if q.storage_error]
    if not damaged:
        return table
    advice = Text("`conveyor doctor` says what to do; `conveyor queues delete --force NAME` removes one.", style="dim")
    return Group(table, *damaged, advice)


def queue_panel(
    q: QueueInfo, m: Metrics | None = None, c: Counters | None = None, *, unserved: bool = False
) -> RenderableType:
    """A queue's settings, figures and consumer; ``unserved``: its push consumer's script runs in no
    live worker (``conveyor workers list``)."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    rows: list[tuple[str, str | Text]] = [
        ("queue", Text(q.queue_name, style="bold cyan")),
        ("id", q.queue_id),
        ("created", _when(q.created_on)),
        ("modified", _when(q.modified_on)),
        ("delivery", Text("paused", style="yellow") if q.settings.delivery_paused else Text("active", style="green")),
        ("delivery delay", f"{q.settings.delivery_delay} s"),
        ("retention", f"{q.settings.message_retention_period:,} s"),
        ("shards", str(q.shards)),
    ]
    if m is not None:
        rows += [
            ("backlog", f"{plural(m.backlog_count, 'message')}, {plural(m.backlog_bytes, 'byte')}"),
            ("oldest message", _ms_time(m.oldest_message_timestamp_ms)),
        ]
    if c is not None:
        rows += [
            ("in flight", f"{c.in_flight:,}"),
            (
                "lifetime",
                f"sent {c.sent:,}  acked {c.acked:,}  retried {c.retried:,}  dead-lettered {c.dead_lettered:,}  "
                f"expired {c.expired:,}  dropped {c.dropped:,}",
            ),
        ]
    for key, value in rows:
        table.add_row(key, value)
    parts: list[RenderableType] = [table]
    if q.consumers:
        parts += [Text(""), consumers_table(q.consumers)]
        if unserved:
            parts.append(
                Text(
                    "no worker for this script: run it with `conveyor worker APP`, or in a server with "
                    "`conveyor serve --worker APP` / `--handlers MODULE`",
                    style="yellow",
                )
            )
    else:
        parts.append(Text("no consumer", style="dim"))
    return Group(*parts)


def history_table(name: str, rows: Sequence[dict[str, Any]]) -> RenderableType:
    """``queues info --history``: one line per recorded point."""
    if not rows:
        return Text(f"no history recorded for {name} yet (the coordinator records every 10 s)")
    table = Table(title=f"{name}: history")
    for column in ("time", "backlog", "oldest", "in flight", "sent/s", "acked/s", "retried/s", "DLQ/s", "concurrency"):
        table.add_column(column, justify="left" if column == "time" else "right")
    for row in rows:
        table.add_row(
            _ms_time(row["at_ms"]),
            str(row["backlog"]),
            f"{row['oldest_age_ms'] / 1000:.0f}s",
            str(row["in_flight"]),
            f"{row['sent_per_second']:.1f}",
            f"{row['acked_per_second']:.1f}",
            f"{row['retried_per_second']:.1f}",
            f"{row['dead_lettered_per_second']:.1f}",
            str(row["concurrency"]),
        )
    return table


def consumers_table(consumers: Sequence[ConsumerInfo]) -> RenderableType:
    if not consumers:
        return Text("no consumer", style="dim")
    table = Table(title="Consumers", title_justify="left")
    for column in ("type", "script", "batch", "retries", "retry delay", "dead letters to", "details"):
        table.add_column(column)
    for c in consumers:
        s = c.settings
        if c.type == "worker":
            concurrency = "auto" if s.max_concurrency is None else str(s.max_concurrency)
            details = f"max wait {s.max_wait_time_ms} ms, concurrency {concurrency}"
        else:
            details = f"visibility timeout {s.visibility_timeout_ms:,} ms"
        table.add_row(
            c.type,
            c.script_name or "-",
            str(s.batch_size),
            str(s.max_retries),
            f"{s.retry_delay} s",
            c.dead_letter_queue or "-",
            details,
        )
    return table


def _preview(body: Any, content_type: str) -> str:
    if content_type == "bytes":
        text = f"<{len(body)} bytes> {bytes(body[:24]).hex()}"
    elif content_type == "text":
        text = str(body)
    else:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= BODY_PREVIEW_CHARS else text[: BODY_PREVIEW_CHARS - 1] + "…"


def messages_table(messages: Sequence[PulledMessage], title: str, show_lease: bool) -> RenderableType:
    if not messages:
        return Text("no messages", style="dim")
    table = Table(title=title, title_justify="left")
    # Ids and lease ids are folded, never cut: people copy them into `conveyor ack`.
    table.add_column("id", style="dim", overflow="fold")
    table.add_column("sent (UTC)", no_wrap=True)
    table.add_column("attempts", justify="right")
    table.add_column("type")
    table.add_column("body")
    if show_lease:
        table.add_column("lease id", style="dim", overflow="fold")
    for m in messages:
        row = [m.id, _sent(m.timestamp_ms), str(m.attempts), m.content_type, _preview(m.body, m.content_type)]
        if show_lease:
            row.append(m.lease_id)
        table.add_row(*row)
    return table
