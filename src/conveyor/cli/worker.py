"""``conveyor worker module:app``: import a module, find its ``conveyor.App``, and run it."""

from __future__ import annotations

import json
import logging
import os
import sys

import click

from conveyor.cli.context import CliState, json_option, pass_state
from conveyor.cli.egress_option import egress_allow_option
from conveyor.consumer import loading
from conveyor.consumer.app import App
from conveyor.tracing import TraceLogFilter

LOG_FORMAT = "%(asctime)s %(levelname)-7s %(name)s [%(trace_id)s]: %(message)s"


class JSONLogFormatter(logging.Formatter):
    """One JSON object per log line, for log collectors."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "trace_id": getattr(record, "trace_id", "-"),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str, as_json: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONLogFormatter() if as_json else logging.Formatter(LOG_FORMAT))
    handler.addFilter(TraceLogFilter())  # every line of a run names its trace
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # httpx logs each request at INFO; a remote worker's long polls and heartbeats are not news.
    logging.getLogger("httpx").setLevel(logging.DEBUG if level == "DEBUG" else logging.WARNING)


def load_app(target: str) -> App:
    """The ``App`` named by ``module:attribute`` (the module is imported from the current directory too)."""
    try:
        return loading.load_app(target)
    except loading.LoadError as exc:
        raise click.BadParameter(str(exc), param_hint="APP") from None


@click.command("worker", short_help="Run the push consumers of a conveyor.App.")
@click.argument("target", metavar="APP")
@click.option(
    "--grace-period",
    type=float,
    help="Seconds running handlers get to finish after SIGTERM/SIGINT (default: the App's, 30).",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
)
@json_option
@egress_allow_option
@pass_state
def worker(state: CliState, target: str, grace_period: float | None, log_level: str, as_json: bool) -> None:
    """Run the push consumers of APP (`module:attribute`, a conveyor.App) until SIGTERM or SIGINT.

    The module is imported with the current directory on the path. With --url, the App connects to
    that deployment (unless its code names another). --json logs one JSON object per line.

    \b
    conveyor worker myapp.workers:app
    """
    configure_logging(log_level.upper(), as_json)
    # App() with no URL connects to $CONVEYOR_URL as $CONVEYOR_ACCOUNT_ID (with $CONVEYOR_TOKEN over
    # HTTP): point them at the global options before the module creates it.
    for variable, value in (
        ("CONVEYOR_URL", state.url),
        ("CONVEYOR_TOKEN", state.token),
        ("CONVEYOR_ACCOUNT_ID", state.account_id),
    ):
        if value:
            os.environ[variable] = value
    app = load_app(target)
    if grace_period is not None:
        app.grace_period = grace_period
    log = logging.getLogger("conveyor.worker")
    if not app.specs and not app.workflows:
        log.warning("%s declares no consumers and no workflows; nothing to run", target)
        return
    log.info(
        "running %s on %s: %s",
        target,
        app.conveyor.url,
        "; ".join(
            [
                f"{s.queue} -> {s.script_name} (batch {s.settings.batch_size}, "
                f"concurrency {s.settings.max_concurrency or 'auto'})"
                for s in app.specs
            ]
            + [f"workflow {w.name} -> {w.settings.script_name}" for w in app.workflows]
        ),
    )
    app.run()
    for queue, dispatcher in app.dispatchers.items():
        log.info(
            "queue %s: handled %d messages, %d failed batches, peak concurrency %d",
            queue,
            dispatcher.handled,
            dispatcher.failures,
            dispatcher.scaler.peak,
        )
