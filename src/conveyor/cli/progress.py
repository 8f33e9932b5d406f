"""Progress bars for long operations, on stderr so that stdout stays parseable.

Each task carries a ``rate`` field (``rate_text``); a bar that measures bytes read (bulk send from a
file) also carries ``sent``, the messages sent so far, since its completed/total are bytes.
"""

from __future__ import annotations

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

from conveyor.cli.context import console


def message_progress(*, quiet: bool = False, by_bytes: bool = False) -> Progress:
    """A progress display counting messages (or bytes read, with ``by_bytes``); silent when
    ``quiet`` or when stderr is not a terminal."""
    err = console(stderr=True)
    count: ProgressColumn = TextColumn("{task.fields[sent]:,} sent") if by_bytes else MofNCompleteColumn()
    return Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description:<28}"),
        BarColumn(bar_width=36),
        count,
        TaskProgressColumn(),
        TextColumn("[cyan]{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=err,
        disable=quiet or not err.is_terminal,
        refresh_per_second=12,
    )


def rate_text(count: float, seconds: float) -> str:
    """``12,345 msg/s`` (or an empty string before there is anything to measure)."""
    return f"{count / seconds:,.0f} msg/s" if seconds > 0 and count else ""
