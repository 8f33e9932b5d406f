"""The queue history: each queue's figures, recorded every few seconds and kept for a day.

The coordinator's ``queue-history`` service (:class:`HistoryRecorder`) reads every queue's
backlog, oldest message, in-flight count, lifetime counters and the live workers' concurrency every
``interval`` seconds (10 by default) and stores one row per queue; rows older than ``keep`` seconds
(24 hours by default) are pruned in the same round. The dashboard's overview and charts and
``conveyor queues info --history`` read these rows, so drawing a thousand queues opens no shard file.

Where the rows live: a SQLite deployment keeps them in ``history.db`` beside ``catalog.db`` (a file
versioned like the catalog, so the catalog's change counter, which every process watches, does not
move every ten seconds); a PostgreSQL deployment in the ``queue_history`` table (migration
``0021_dashboard.sql``). Rows are keyed by the queue's qualified name (``ACCOUNT/NAME``), so an
account reads only its own. Beside them, ``queue_latest`` holds each queue's newest point and the
one before it (history.db version 2, migration ``0024_queue_latest.sql``), written in the
transaction that records the points and pruned with them: the overview ranks and draws its queues
from it (:meth:`HistoryStore.latest_figures`, :meth:`HistoryStore.latest`) without a seek a queue.

>>> history = open_history(engine.deployment())
>>> points = history.of_queue("local/emails", since_ms=now_ms - 3_600_000)
>>> rates(points)[-1].sent_per_second
12.5
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from conveyor.deployment import Deployment
from conveyor.engine.base import Engine, prefix_range
from conveyor.engine.queue_faults import QueueFaults
from conveyor.engine.sqlfile import load_queries, load_script
from conveyor.engine.tables import PostgresTables, SqliteFile, Tables, Transaction, open_tables
from conveyor.errors import InvalidRequest
from conveyor.model import QueueInfo

log = logging.getLogger("conveyor.coordinator")

DEFAULT_INTERVAL_SECONDS = 10.0
DEFAULT_KEEP_SECONDS = 24 * 3600.0
MIN_INTERVAL_SECONDS = 0.2
FILE_NAME = "history.db"
QUERIES = load_queries("conveyor.engine.history", "queries.sql")
# Version 2 added queue_latest (filled from the points by the upgrade).
SQLITE_FILE = SqliteFile(
    FILE_NAME,
    load_script("conveyor.engine.history", "history_sqlite.sql"),
    version=2,
    upgrades={1: load_script("conveyor.engine.history", "history_v1_to_v2.sql")},
)
COLUMNS = (
    "queue_id",
    "queue_name",
    "at_ms",
    "backlog",
    "backlog_bytes",
    "oldest_ms",
    "in_flight",
    "sent",
    "acked",
    "retried",
    "dead_lettered",
    "concurrency",
)
# What HistoryStore.latest_figures gives for each figure the overview sorts by.
LATEST_FIGURES = ("backlog", "oldest", "in_flight", "concurrency", "sent")


@dataclasses.dataclass(frozen=True, slots=True)
class QueuePoint:
    """One queue's figures at ``at_ms``. ``queue_name`` is qualified (``ACCOUNT/NAME``) as stored;
    the counters are lifetime totals (:func:`rates` turns two points into rates)."""

    queue_id: str
    queue_name: str
    at_ms: int
    backlog: int
    backlog_bytes: int
    oldest_ms: int
    in_flight: int
    sent: int
    acked: int
    retried: int
    dead_lettered: int
    concurrency: int

    @property
    def oldest_age_ms(self) -> int:
        """How old the oldest stored message was at ``at_ms`` (0 when the queue was empty)."""
        return 0 if self.oldest_ms <= 0 else max(0, self.at_ms - self.oldest_ms)


@dataclasses.dataclass(frozen=True, slots=True)
class QueueRates:
    """Messages per second between a point and the one before it."""

    at_ms: int
    sent_per_second: float
    acked_per_second: float
    retried_per_second: float
    dead_lettered_per_second: float


def rates(points: Sequence[QueuePoint]) -> list[QueueRates]:
    """The rates between consecutive points of one queue (one fewer than the points). A counter that
    went down (the queue was deleted and made again under its name) counts as a rate of 0."""
    out = []
    for before, after in itertools.pairwise(points):
        seconds = max(0.001, (after.at_ms - before.at_ms) / 1000)
        deltas = [
            max(0, a - b) / seconds
            for a, b in (
                (after.sent, before.sent),
                (after.acked, before.acked),
                (after.retried, before.retried),
                (after.dead_lettered, before.dead_lettered),
            )
        ]
        out.append(QueueRates(after.at_ms, *deltas))
    return out


def history_rows(points: Sequence[QueuePoint]) -> list[dict[str, Any]]:
    """The points as plain rows (``queues info --history --json``, the dashboard's charts): the
    figures of each point, and the rates since the point before (0 for the first)."""
    rows = []
    previous = [None, *rates(points)][: len(points)]
    for point, rate in zip(points, previous, strict=True):
        rows.append(
            {
                "at_ms": point.at_ms,
                "backlog": point.backlog,
                "backlog_bytes": point.backlog_bytes,
                "oldest_age_ms": point.oldest_age_ms,
                "in_flight": point.in_flight,
                "concurrency": point.concurrency,
                "sent_per_second": rate.sent_per_second if rate else 0.0,
                "acked_per_second": rate.acked_per_second if rate else 0.0,
                "retried_per_second": rate.retried_per_second if rate else 0.0,
                "dead_lettered_per_second": rate.dead_lettered_per_second if rate else 0.0,
            }
        )
    return rows


class HistoryStore(Protocol):
    """Where the points live (one implementation per engine kind)."""

    def record(self, points: Sequence[QueuePoint]) -> None: ...

    def prune(self, before_ms: int) -> None: ...

    def of_queue(self, queue_name: str, since_ms: int) -> list[QueuePoint]:
        """One queue's points (by qualified name) since ``since_ms``, oldest first."""
        ...

    def newest(self, queue_names: Sequence[str], since_ms: int, count: int = 2) -> dict[str, list[QueuePoint]]:
        """Each queue's newest ``count`` points since ``since_ms`` (by qualified name, oldest
        first; a queue with none is left out): the overview's figures, one index seek a queue."""
        ...

    def latest(self, queue_names: Sequence[str], since_ms: int) -> dict[str, list[QueuePoint]]:
        """Each queue's newest point since ``since_ms`` and, if also since then, the one before it
        (by qualified name, oldest first; a queue with none is left out), from ``queue_latest``:
        what :meth:`newest` with ``count=2`` gives, in one read without a seek into the points."""
        ...

    def latest_figures(self, prefix: str, since_ms: int, figure: str) -> dict[str, float]:
        """``figure`` (one of LATEST_FIGURES: the backlog, the oldest message's age in seconds, in
        flight, concurrency, or messages sent a second since the point before) of every queue whose
        qualified name starts with ``prefix`` and whose newest point is since ``since_ms``, by
        qualified name: the overview's ranking of every queue, one range read of ``queue_latest``."""
        ...

    def backlog_by_bucket(self, queue_names: Sequence[str], since_ms: int, bucket_ms: int) -> dict[str, list[int]]:
        """Each queue's backlog since ``since_ms``, one value per ``bucket_ms`` (the highest in
        it), oldest first, thinned by the database: a sparkline's points, whatever the interval."""
        ...

    def close(self) -> None: ...


def _point(row: Sequence[Any]) -> QueuePoint:
    return QueuePoint(*row)


def _grouped(rows: Sequence[Sequence[Any]]) -> dict[str, list[QueuePoint]]:
    out: dict[str, list[QueuePoint]] = {}
    for row in rows:
        point = _point(row)
        out.setdefault(point.queue_name, []).append(point)
    return out


def _range(prefix: str) -> tuple[str, str]:
    return prefix_range(prefix) if prefix else ("", "\U0010ffff")


class HistoryTables:
    """The points in the deployment's tables (engine/tables.py): ``history.db`` on SQLite, the
    ``queue_history`` table on PostgreSQL; one set of queries for both (and, on PostgreSQL, the
    overview's reads of many queues in one statement each instead of one a queue)."""

    def __init__(self, tables: Tables) -> None:
        self._tables = tables
        self._arrays = isinstance(tables, PostgresTables)  # it takes an array of names in one query

    def record(self, points: Sequence[QueuePoint]) -> None:
        """Store the points, and in the same transaction keep ``queue_latest`` right: a point newer
        than its queue's newest there becomes the newest (the newest the one before it); an older
        one newer than the one before it (recorded out of order) the one before it. A point whose
        queue and time are already stored is left out, of both tables."""

        def insert(tx: Transaction) -> None:
            for point in points:
                row = dataclasses.asdict(point)
                if tx.run("insert", row) and not tx.run("record_latest", row):
                    tx.run("record_latest_previous", row)

        self._tables.transaction(insert, "record the queue history")

    def prune(self, before_ms: int) -> None:
        """Delete the points older than ``before_ms``, and in the same transaction the newest points
        (and points before them) of ``queue_latest`` that are."""

        def prune(tx: Transaction) -> None:
            args = {"cutoff": before_ms}
            tx.run("prune", args)
            tx.run("prune_latest", args)
            tx.run("prune_latest_previous", args)

        self._tables.transaction(prune, "prune the queue history")

    def of_queue(self, queue_name: str, since_ms: int) -> list[QueuePoint]:
        args = {"name": queue_name, "since": since_ms}
        return [_point(r) for r in self._tables.read(lambda tx: tx.rows("of_queue", args), "read the queue history")]

    def newest(self, queue_names: Sequence[str], since_ms: int, count: int = 2) -> dict[str, list[QueuePoint]]:
        if count < 1:
            raise InvalidRequest(f"the newest points are at least 1, not {count}")
        query = "newest_of_queues" if self._arrays else "newest_of_queues_json"
        args = {"names": self._names(queue_names), "since": since_ms, "count": count}
        return _grouped(self._tables.read(lambda tx: tx.rows(query, args), "read the queue history"))

    def latest(self, queue_names: Sequence[str], since_ms: int) -> dict[str, list[QueuePoint]]:
        query = "latest_of_queues" if self._arrays else "latest_of_queues_json"
        args = {"names": self._names(queue_names), "since": since_ms}
        out: dict[str, list[QueuePoint]] = {}
        for row in self._tables.read(lambda tx: tx.rows(query, args), "read the queue history"):
            newest = _point(row[:12])
            before = row[12:]
            if before[1] is not None and before[1] >= since_ms:
                out[newest.queue_name] = [QueuePoint(before[0], newest.queue_name, *before[1:]), newest]
            else:
                out[newest.queue_name] = [newest]
        return out

    def latest_figures(self, prefix: str, since_ms: int, figure: str) -> dict[str, float]:
        if figure not in LATEST_FIGURES:
            raise InvalidRequest(f"the overview sorts by one of {', '.join(LATEST_FIGURES)}, not {figure!r}")
        column = 1 + LATEST_FIGURES.index(figure)
        lo, hi = _range(prefix)
        args = {"lo": lo, "hi": hi, "since": since_ms}
        rows = self._tables.read(lambda tx: tx.rows("latest_figures_of_prefix", args), "read the queue history")
        scale = 1000.0 if figure == "oldest" else 1.0
        return {row[0]: float(row[column]) / scale for row in rows}

    def _names(self, queue_names: Sequence[str]) -> object:
        """Queue names as one parameter: an array on PostgreSQL, a JSON array on SQLite."""
        return list(queue_names) if self._arrays else json.dumps(list(queue_names))

    def backlog_by_bucket(self, queue_names: Sequence[str], since_ms: int, bucket_ms: int) -> dict[str, list[int]]:
        if bucket_ms < 1:
            raise InvalidRequest(f"a history bucket is at least 1 ms, not {bucket_ms}")
        query = "backlog_by_bucket_of_queues" if self._arrays else "backlog_by_bucket_of_queues_json"
        args = {"names": self._names(queue_names), "since": since_ms, "bucket_ms": bucket_ms}
        rows = self._tables.read(lambda tx: tx.rows(query, args), "read the queue history")
        sparks: dict[str, list[int]] = {name: [] for name in queue_names}
        for name, _, backlog in rows:
            sparks[name].append(int(backlog))
        return sparks

    def close(self) -> None:
        self._tables.close()


def open_history(deployment: Deployment) -> HistoryStore:
    """The history store of a SQLite or PostgreSQL deployment (a server's URL has none here: its
    clients read the history through the server)."""
    tables = open_tables(deployment, SQLITE_FILE, QUERIES, pool_size=2)
    if tables is not None:
        return HistoryTables(tables)
    raise InvalidRequest(f"the queue history is kept by the deployment, and {deployment.location} is a server")


@dataclasses.dataclass(frozen=True, slots=True)
class HistorySettings:
    """How often the coordinator records the history, and how long it keeps it (seconds)."""

    interval: float = DEFAULT_INTERVAL_SECONDS
    keep: float = DEFAULT_KEEP_SECONDS


class HistoryRecorder:
    """The coordinator's ``queue-history`` service: one point per queue per round, then a prune.

    ``keep_seconds``: how long points are kept (24 hours by default)."""

    def __init__(self, engine: Engine, keep_seconds: float = DEFAULT_KEEP_SECONDS) -> None:
        if keep_seconds <= 0:
            raise InvalidRequest(f"history keep must be more than 0 seconds, not {keep_seconds}")
        self.engine = engine
        self.keep_ms = int(keep_seconds * 1000)
        self.faults = QueueFaults("queue history", log)
        self._store: HistoryStore | None = None
        self._lock = threading.Lock()

    def _opened(self) -> HistoryStore | None:
        with self._lock:
            if self._store is None:
                deployment = self.engine.deployment()
                if deployment.kind == "http":
                    return None
                self._store = open_history(deployment)
            return self._store

    def __call__(self) -> int:
        """Record every queue's point now; the number recorded."""
        store = self._opened()
        if store is None:
            return 0
        now = self.engine.clock.now_ms()
        concurrency: dict[str, int] = {}
        for entry in self.engine.list_workers():
            for run in entry.runs:
                concurrency[run.queue_id] = concurrency.get(run.queue_id, 0) + run.concurrency
        # An account's view lists its queues by their plain names: stored qualified all the same.
        account = self.engine.deployment().account
        points = []
        for queue in self.engine.list_queues():
            with self.faults.isolated(queue):
                point = self._point(queue, now, concurrency.get(queue.queue_id, 0))
                points.append(
                    dataclasses.replace(point, queue_name=f"{account}/{queue.queue_name}") if account else point
                )
        store.record(points)
        store.prune(now - self.keep_ms)
        return len(points)

    def _point(self, queue: QueueInfo, now_ms: int, concurrency: int) -> QueuePoint:
        metrics = self.engine.metrics(queue.queue_id)
        counters = self.engine.counters(queue.queue_id)
        return QueuePoint(
            queue.queue_id,
            queue.queue_name,
            now_ms,
            metrics.backlog_count,
            metrics.backlog_bytes,
            metrics.oldest_message_timestamp_ms,
            counters.in_flight,
            counters.sent,
            counters.acked,
            counters.retried,
            counters.dead_lettered,
            concurrency,
        )

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None
