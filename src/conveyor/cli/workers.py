"""``conveyor workers list``: the live worker processes (what each runs, since when, its concurrency),
and the push consumers that no worker runs ("no worker for this script")."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from conveyor.cli.context import CliState, emit, json_option, pass_state
from conveyor.model import QueueInfo, WorkerEntry

NO_WORKER = "no worker for this script"


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def unserved(queues: list[QueueInfo], workers: list[WorkerEntry]) -> list[dict[str, str]]:
    """Push consumers whose script no live worker runs on their queue."""
    running = {(run.queue_id, run.script_name) for entry in workers for run in entry.runs}
    return [
        {"queue_name": q.queue_name, "queue_id": q.queue_id, "script_name": c.script_name, "status": NO_WORKER}
        for q in queues
        for c in q.consumers
        if c.type == "worker" and (q.queue_id, c.script_name) not in running
    ]


def _account(queue_name: str, account_id: str | None) -> str:
    """The account of a queue as listed: the prefix of an operator's view, else the caller's own."""
    account = queue_name.rpartition("/")[0]
    return account or account_id or ""


def _document(
    workers: list[WorkerEntry], missing: list[dict[str, str]], now_ms: int, account_id: str | None
) -> dict[str, Any]:
    return {
        "workers": [
            {
                "worker_id": w.worker_id,
                "host": w.host,
                "pid": w.pid,
                "started_on": _iso(w.started_ms),
                "last_heartbeat_seconds_ago": round(max(0, now_ms - w.heartbeat_ms) / 1000, 1),
                "runs": [
                    {
                        "account_id": _account(r.queue_name, account_id),
                        "queue_name": r.queue_name,
                        "queue_id": r.queue_id,
                        "script_name": r.script_name,
                        "concurrency": r.concurrency,
                        "max_concurrency": r.max_concurrency,
                    }
                    for r in w.runs
                ],
            }
            for w in workers
        ],
        "no_worker": missing,
    }


def _workers_table(workers: list[dict[str, Any]]) -> Table:
    table = Table(title="Workers", title_justify="left")
    for name in ("worker", "process", "started", "heartbeat", "queue", "script", "running"):
        table.add_column(name, no_wrap=True)
    for w in workers:
        for i, r in enumerate(w["runs"] or [None]):
            first = i == 0
            table.add_row(
                w["worker_id"][:12] if first else "",
                f"{w['host']}:{w['pid']}" if first else "",
                w["started_on"] if first else "",
                f"{w['last_heartbeat_seconds_ago']:g} s ago" if first else "",
                r["queue_name"] if r else "-",
                r["script_name"] if r else "-",
                f"{r['concurrency']}/{r['max_concurrency'] or 'auto'}" if r else "-",
            )
    return table


def _missing_table(missing: list[dict[str, str]]) -> Table:
    table = Table(title="Push consumers with no worker", title_justify="left")
    for name in ("queue", "script", "status"):
        table.add_column(name, no_wrap=True)
    for m in missing:
        table.add_row(m["queue_name"], m["script_name"], Text(m["status"], style="yellow"))
    return table


def _tables(document: dict[str, Any]) -> RenderableType:
    parts: list[RenderableType] = []
    if document["workers"]:
        parts.append(_workers_table(document["workers"]))
    if document["no_worker"]:
        parts.append(_missing_table(document["no_worker"]))
    return Group(*parts) if parts else Text("No workers are running. Start one: conveyor worker myapp:app", style="dim")


@click.group("workers")
def workers_group() -> None:
    """The deployment's worker processes (conveyor worker, conveyor serve --worker/--handlers)."""


@workers_group.command("list")
@json_option
@pass_state
def list_workers(state: CliState, as_json: bool) -> None:
    """List live workers: what each runs, since when, its concurrency; and the push consumers no
    worker runs ("no worker for this script"). Over HTTP: the token's account only.

    \b
    conveyor workers list
    conveyor --url http://127.0.0.1:8787 workers list --json
    """
    cv = state.connect()
    workers = cv.engine.list_workers()
    document = _document(workers, unserved(cv.list_queues(), workers), cv.engine.clock.now_ms(), state.account_id)
    emit(as_json, document, lambda: _tables(document))
