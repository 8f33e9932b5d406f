"""``conveyor demo``: a tour of Conveyor in half a minute, on a fresh SQLite directory.

It sends tens of thousands of messages while a worker consumes them, measures throughput and
latency, lets a buggy handler fill a dead letter queue, "deploys the fix", and redrives the dead
letters back — then prints what it measured.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

import conveyor
from conveyor import limits
from conveyor.cli.context import CliError, console, json_option
from conveyor.cli.demo_workload import ORDERS, PAYMENTS, PAYMENTS_DLQ, PINGS, Workload, payment
from conveyor.cli.progress import message_progress, rate_text
from conveyor.cli.render import plural

DEFAULT_DIR = "./.conveyor-demo"
# Anything the demo waits for that takes longer than this is a failure, not patience.
STALL_SECONDS = 120.0
# The idle-latency probe: this many single sends, this far apart.
PINGS_COUNT = 200
PING_INTERVAL = 0.003


class LogCounter(logging.Handler):
    """Keeps the worker's logs off the progress bars: counts the handler failures the demo causes on
    purpose, and keeps any other warning to show at the end."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.handler_errors = 0
        self.unexpected: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "conveyor.consumer" and "handler raised" in record.getMessage():
            self.handler_errors += 1
        else:
            self.unexpected.append(f"{record.levelname} {record.name}: {record.getMessage()}")


def fresh_directory(path: Path) -> None:
    """Wipe ``path`` for the demo — but only if it is empty or a Conveyor data directory."""
    if path.exists():
        if not path.is_dir() or (any(path.iterdir()) and not (path / "catalog.db").exists()):
            raise CliError(f"refusing to wipe {path}: it is not a Conveyor data directory; choose another --dir")
        shutil.rmtree(path)


def wait_for(what: str, done: Callable[[], bool], tick: Callable[[], None] = lambda: None) -> None:
    deadline = time.monotonic() + STALL_SECONDS
    while not done():
        if time.monotonic() > deadline:
            raise CliError(f"demo stalled: {what} did not happen within {STALL_SECONDS:.0f} s")
        tick()
        time.sleep(0.02)
    tick()


class Demo:
    """The demo's steps, narrated on ``out`` (silent when ``quiet``), with progress bars on stderr."""

    def __init__(self, directory: Path, messages: int, out: Console, quiet: bool) -> None:
        self.directory = directory
        self.messages = messages
        self.out = out
        self.quiet = quiet
        self.work = Workload()
        self.logs = LogCounter()
        self.results: dict[str, Any] = {}

    def say(self, text: str) -> None:
        if not self.quiet:
            self.out.print(text)

    def run(self) -> dict[str, Any]:
        started = time.perf_counter()
        fresh_directory(self.directory)
        logger = logging.getLogger("conveyor")
        previous = (logger.handlers[:], logger.propagate, logger.level)
        logger.handlers[:], logger.propagate = [self.logs], False
        logger.setLevel(logging.INFO)
        cv = conveyor.connect(f"sqlite://{self.directory}")
        try:
            for name in (ORDERS, PINGS, PAYMENTS, PAYMENTS_DLQ):
                cv.create_queue(name)
            self.say(
                f"[bold]1.[/] Fresh deployment in [cyan]{self.directory}[/]: queues "
                f"[cyan]{ORDERS}[/], [cyan]{PINGS}[/], [cyan]{PAYMENTS}[/] (dead letters to [cyan]{PAYMENTS_DLQ}[/])"
            )
            app = self.work.app(cv)
            app.start()
            try:
                self.throughput(cv, app)
                self.idle_latency(cv)
                self.dead_letters(cv)
                self.redrive(cv)
            finally:
                app.stop()
        finally:
            cv.close()
            logger.handlers[:], logger.propagate, logger.level = previous
            for line in self.logs.unexpected:
                self.say(f"[yellow]{line}")
        self.results["elapsed_seconds"] = round(time.perf_counter() - started, 2)
        self.results["warnings"] = self.logs.unexpected
        return self.results

    # -- 2. throughput ------------------------------------------------------------------------
    def throughput(self, cv: conveyor.Conveyor, app: conveyor.App) -> None:
        n, orders, stats = self.messages, cv.queue(ORDERS), self.work.orders
        self.say(f"[bold]2.[/] Sending [bold]{n:,}[/] orders in batches of 100 while a worker consumes them")
        with message_progress(quiet=self.quiet) as progress:
            sending = progress.add_task(f"send → {ORDERS}", total=n, rate="")
            handling = progress.add_task(f"worker handles {ORDERS}", total=n, rate="")
            t0 = time.perf_counter()
            for start in range(0, n, limits.MAX_BATCH_MESSAGES):
                size = min(limits.MAX_BATCH_MESSAGES, n - start)
                now = time.time()
                orders.send_batch([{"body": {"order": start + i, "t": now}} for i in range(size)])
                progress.update(sending, completed=start + size, rate=rate_text(start + size, time.perf_counter() - t0))
                progress.update(
                    handling, completed=stats.handled, rate=rate_text(stats.handled, time.perf_counter() - t0)
                )
            send_seconds = time.perf_counter() - t0

            def tick() -> None:
                progress.update(handling, completed=stats.handled, rate=f"{stats.rate():,.0f} msg/s")

            wait_for(f"handling {n:,} orders", lambda: stats.handled >= n, tick)
        peak = app.dispatchers[ORDERS].scaler.peak
        self.results["send"] = {"messages": n, "seconds": round(send_seconds, 3), "rate": round(n / send_seconds)}
        self.results["consume"] = {
            "messages": stats.handled,
            "seconds": round(stats.last_end - stats.first_start, 3),
            "rate": round(stats.rate()),
            "peak_concurrency": peak,
        }
        self.results["latency_under_load_ms"] = stats.latency_summary_ms()
        self.say(
            f"   [green]✓[/] sent at [bold]{n / send_seconds:,.0f}[/] msg/s, consumed at "
            f"[bold]{stats.rate():,.0f}[/] msg/s with up to {peak} batches at once"
        )

    # -- 3. idle latency ----------------------------------------------------------------------
    def idle_latency(self, cv: conveyor.Conveyor) -> None:
        pings, stats = cv.queue(PINGS), self.work.pings
        self.say(f"[bold]3.[/] Latency on an idle queue: {PINGS_COUNT} single messages, one at a time")
        for i in range(PINGS_COUNT):
            pings.send({"ping": i, "t": time.time()})
            time.sleep(PING_INTERVAL)
        wait_for("handling the pings", lambda: stats.handled >= PINGS_COUNT)
        self.results["latency_idle_ms"] = stats.latency_summary_ms()
        self.say(
            f"   [green]✓[/] send → handler start: p50 [bold]{stats.percentile_ms(50):.1f}[/] ms, "
            f"p99 [bold]{stats.percentile_ms(99):.1f}[/] ms"
        )

    # -- 4. a bug fills the dead letter queue -------------------------------------------------
    def dead_letters(self, cv: conveyor.Conveyor) -> None:
        count = max(100, self.messages // 10)
        expected = len([n for n in range(count) if payment(n)["card"] == "expired"])
        payments, dlq = cv.queue(PAYMENTS), cv.queue(PAYMENTS_DLQ)
        self.say(
            f"[bold]4.[/] Sending {count:,} payments to a handler with a bug: it declines expired cards and "
            "raises (max_retries=1)"
        )
        state = self.work.payments
        with message_progress(quiet=self.quiet) as progress:
            charging = progress.add_task(f"worker charges {PAYMENTS}", total=count - expected, rate="")
            dead_letters = progress.add_task(f"dead letters → {PAYMENTS_DLQ}", total=expected, rate="")
            for start in range(0, count, limits.MAX_BATCH_MESSAGES):
                size = min(limits.MAX_BATCH_MESSAGES, count - start)
                payments.send_batch([{"body": payment(start + i)} for i in range(size)])

            def settled() -> bool:
                return dlq.metrics().backlog_count >= expected and payments.metrics().backlog_count == 0

            def tick() -> None:
                progress.update(charging, completed=state.charged)
                progress.update(dead_letters, completed=dlq.metrics().backlog_count)

            wait_for("dead-lettering the declined payments", settled, tick)
        dead = dlq.metrics().backlog_count
        self.results["dead_letter"] = {
            "payments": count,
            "charged": state.charged,
            "dead_lettered": dead,
            "handler_errors": self.logs.handler_errors,
        }
        self.say(
            f"   [red]✗[/] {self.logs.handler_errors} failed batches; [bold]{dead}[/] payments tried twice "
            f"and moved to [cyan]{PAYMENTS_DLQ}[/] — nothing lost"
        )

    # -- 5. the fix and the redrive -----------------------------------------------------------
    def redrive(self, cv: conveyor.Conveyor) -> None:
        dlq, state = cv.queue(PAYMENTS_DLQ), self.work.payments
        dead, charged_before = dlq.metrics().backlog_count, state.charged
        state.fixed = True
        self.say(f"[bold]5.[/] Deploying the fix, then: conveyor redrive {PAYMENTS_DLQ} --to {PAYMENTS}")
        with message_progress(quiet=self.quiet) as progress:
            task = progress.add_task("worker charges redriven", total=dead, rate="")
            moved = dlq.redrive(to=PAYMENTS)
            wait_for(
                "charging the redriven payments",
                lambda: state.charged - charged_before >= dead,
                lambda: progress.update(task, completed=state.charged - charged_before),
            )
        self.results["redrive"] = {
            "redriven": moved,
            "charged_after_fix": state.charged - charged_before,
            "dead_letter_backlog": dlq.metrics().backlog_count,
        }
        redrove = plural(moved, "message")
        self.say(f"   [green]✓[/] redrove {redrove}; all charged; [cyan]{PAYMENTS_DLQ}[/] is empty again")


def summary(r: dict[str, Any]) -> Panel:
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column("")
    table.add_column("result", justify="right")
    table.add_column("", style="dim")
    s, c = r["send"], r["consume"]
    table.add_row("send", f"[bold green]{s['rate']:,} msg/s", f"{s['messages']:,} messages in {s['seconds']:.2f} s")
    table.add_row(
        "consume",
        f"[bold green]{c['rate']:,} msg/s",
        f"{c['messages']:,} messages in {c['seconds']:.2f} s, up to {c['peak_concurrency']} batches at once",
    )
    load, idle = r["latency_under_load_ms"], r["latency_idle_ms"]
    table.add_row("latency, idle queue", f"p50 {idle['p50']:.1f} ms", f"send → handler start, p99 {idle['p99']:.1f} ms")
    table.add_row(
        "latency, under load",
        f"p50 {load['p50']:,.0f} ms",
        f"p99 {load['p99']:,.0f} ms (includes waiting behind the backlog)",
    )
    d, rd = r["dead_letter"], r["redrive"]
    table.add_row("dead-lettered", f"{d['dead_lettered']:,}", f"of {d['payments']:,} payments, by the bug")
    table.add_row(
        "redriven and charged", f"{rd['charged_after_fix']:,}", f"dead letter backlog now {rd['dead_letter_backlog']}"
    )
    footer = Text(f"every message durable before send returned · finished in {r['elapsed_seconds']:.1f} s", style="dim")
    return Panel(Group(table, Text(""), footer), title="[bold]Conveyor demo results", border_style="cyan", expand=False)


@click.command("demo", short_help="A 30-second tour: throughput, latency, DLQ, redrive.")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_DIR,
    show_default=True,
    help="Data directory for the demo; wiped at the start.",
)
@click.option(
    "--messages",
    type=click.IntRange(min=100),
    default=20_000,
    show_default=True,
    help="How many orders to send in the throughput run.",
)
@json_option
def demo(directory: Path, messages: int, as_json: bool) -> None:
    """Run a tour of Conveyor: throughput, latency, a dead letter queue and a redrive.

    Uses its own fresh data directory (--dir), never --url.
    """
    out = console()
    if not as_json:
        out.print(
            Panel.fit(
                "[bold]Conveyor[/] — durable message queues with Cloudflare Queues' semantics, here on embedded SQLite",
                border_style="cyan",
            )
        )
    results = Demo(directory, messages, out, quiet=as_json).run()
    if as_json:
        click.echo(json.dumps(results, indent=2))
    else:
        out.print(summary(results))
