"""What the dashboard's pages show, computed from the catalog and the queue history (never from
the queues' shards, except on one queue's own page): rows of the overview, sparklines, and message
bodies made safe to show."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from conveyor.engine.history import QueuePoint, rates
from conveyor.model import QueueInfo, StoredMessage, WorkerEntry
from conveyor.slurper import JobProgress

NO_WORKER = "no worker"
SPARK_WIDTH, SPARK_HEIGHT = 120, 24
# A body longer than this shows folded (its head first, the whole on demand) ...
FOLD_CHARS = 600
# ... and past this it is cut: a page of peeked messages stays small whatever they hold.
SHOW_BYTES = 64 * 1024
SORTS = ("name", "backlog", "oldest", "in_flight", "sent", "concurrency")


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One line of the overview."""

    name: str
    paused: bool
    consumer: str  # "worker", "http_pull" or ""
    no_worker: bool
    backlog: int | None  # None: nothing recorded yet
    oldest_age_s: float
    in_flight: int
    sent_per_s: float
    acked_per_s: float
    retried_per_s: float
    dead_lettered_per_s: float
    concurrency: int
    spark: str  # the SVG polyline's points of the backlog over the history shown
    at_ms: int


def unserved(queues: Sequence[QueueInfo], workers: Sequence[WorkerEntry]) -> set[str]:
    """Names of queues with a push consumer whose script no live worker runs."""
    running = {(run.queue_id, run.script_name) for entry in workers for run in entry.runs}
    return {
        q.queue_name
        for q in queues
        for c in q.consumers
        if c.type == "worker" and (q.queue_id, c.script_name) not in running
    }


@dataclass(frozen=True, slots=True)
class WorkerRow:
    """A live worker process and the runs of it the session may see (``conveyor workers list``)."""

    host: str
    pid: int
    up_s: float
    heard_s: float
    runs: tuple[tuple[str, str, int, int | None], ...]  # queue, script, concurrency, its limit


def worker_rows(workers: Sequence[WorkerEntry], sees: Callable[[str], bool], now_ms: int) -> list[WorkerRow]:
    rows = []
    for entry in workers:
        runs = tuple(
            (run.queue_name, run.script_name, run.concurrency, run.max_concurrency)
            for run in entry.runs
            if sees(run.queue_name)
        )
        if runs:
            up, heard = (now_ms - entry.started_ms) / 1000, (now_ms - entry.heartbeat_ms) / 1000
            rows.append(WorkerRow(entry.host, entry.pid, max(0.0, up), max(0.0, heard), runs))
    return rows


def sparkline(values: Sequence[int]) -> str:
    """The ``points`` of an SVG polyline drawing ``values`` in a SPARK_WIDTH x SPARK_HEIGHT box."""
    if not values:
        return ""
    top = max(values) or 1
    step = SPARK_WIDTH / max(1, len(values) - 1)
    return " ".join(
        f"{i * step:.1f},{SPARK_HEIGHT - 1 - (v / top) * (SPARK_HEIGHT - 2):.1f}" for i, v in enumerate(values)
    )


def queue_row(
    queue: QueueInfo, points: Sequence[QueuePoint], no_worker: bool, spark: Sequence[int] | None = None
) -> QueueRow:
    """A line of the overview from the queue's newest points (two suffice: the figures and the
    rates); ``spark``: the backlog to draw (the points' own when not given)."""
    last = points[-1] if points else None
    rate = rates(points[-2:])
    consumer = queue.consumers[0].type if queue.consumers else ""
    return QueueRow(
        name=queue.queue_name,
        paused=queue.settings.delivery_paused,
        consumer=consumer,
        no_worker=no_worker,
        backlog=last.backlog if last else None,
        oldest_age_s=(last.oldest_age_ms / 1000) if last else 0.0,
        in_flight=last.in_flight if last else 0,
        sent_per_s=rate[0].sent_per_second if rate else 0.0,
        acked_per_s=rate[0].acked_per_second if rate else 0.0,
        retried_per_s=rate[0].retried_per_second if rate else 0.0,
        dead_lettered_per_s=rate[0].dead_lettered_per_second if rate else 0.0,
        concurrency=last.concurrency if last else 0,
        spark=sparkline([p.backlog for p in points] if spark is None else spark),
        at_ms=last.at_ms if last else 0,
    )


@dataclass(frozen=True, slots=True)
class Pager:
    """Which slice of a long list a page shows: ``page`` of ``pages`` (1-based), ``size`` a page."""

    page: int
    pages: int
    size: int
    total: int

    @property
    def first(self) -> int:
        return (self.page - 1) * self.size

    @property
    def last(self) -> int:
        return min(self.total, self.page * self.size)


def pager(total: int, asked: str, size: int) -> Pager:
    """The page ``asked`` for (a query parameter: anything not a number is page 1, past the end
    the last page) of ``total`` rows, ``size`` a page."""
    pages = max(1, -(-total // size))
    page = int(asked) if asked.isdecimal() and len(asked) < 10 else 1
    return Pager(min(max(1, page), pages), pages, size, total)


def rank_names(names: Sequence[str], points: dict[str, Sequence[QueuePoint]], sort: str, descending: bool) -> list[str]:
    """``names`` in the order of ``sort`` (one of SORTS) by each queue's newest points, ties by
    name: the overview's order, found before any row is built."""

    def key(name: str) -> tuple[float, str]:
        found = points.get(name) or ()
        last = found[-1] if found else None
        if sort == "sent":
            rate = rates(found[-2:])
            return (rate[0].sent_per_second if rate else 0.0, name)
        if last is None:
            return (0.0, name)
        figure = {
            "backlog": last.backlog,
            "oldest": last.oldest_age_ms / 1000,
            "in_flight": last.in_flight,
            "concurrency": last.concurrency,
        }.get(sort, 0)
        return (float(figure), name)

    if sort == "name":
        return sorted(names, reverse=descending)
    return sorted(names, key=key, reverse=descending)


def rank_by_figure(names: Sequence[str], figures: dict[str, float], descending: bool) -> list[str]:
    """``names`` in the order of their ``figures`` (0 for a name without one), ties by name, as
    :func:`rank_names` orders them by the points the figures were read from."""
    return sorted(names, key=lambda name: (figures.get(name, 0.0), name), reverse=descending)


@dataclass(frozen=True, slots=True)
class ShownBody:
    """A message body as the page shows it: always text (escaped by the template), with how it was
    read; ``head`` is what shows folded when ``folded``."""

    kind: str  # "text", "json" or "hex"
    text: str
    head: str
    folded: bool
    cut: bool
    size: int


def _hex(data: bytes) -> str:
    return "\n".join(data[i : i + 32].hex(" ") for i in range(0, len(data), 32))


def show_body(message: StoredMessage) -> ShownBody:
    """Render a body by its content type: text as text, JSON pretty-printed, anything else (bytes,
    v8) as hex; cut past SHOW_BYTES, folded past FOLD_CHARS. Never markup: the template escapes it."""
    return show_data(message.body, message.content_type)


def show_data(body: bytes, kind: str) -> ShownBody:
    """``body`` as the page shows it, read as ``kind``: ``text``, ``json`` (pretty-printed, or as
    text if it does not parse) or anything else as hex (a message's bytes and v8, a KV ``bytes``
    value). Cut past SHOW_BYTES, folded past FOLD_CHARS; the template escapes what it holds."""
    shown, cut = body[:SHOW_BYTES], len(body) > SHOW_BYTES
    if kind == "json" and not cut:
        try:
            kind, text = "json", json.dumps(json.loads(shown), indent=2, ensure_ascii=False)
        except ValueError:
            kind, text = "text", shown.decode("utf-8", "replace")
    elif kind in ("text", "json"):
        kind, text = "text", shown.decode("utf-8", "replace")
    else:
        kind, text = "hex", _hex(shown)
    folded = len(text) > FOLD_CHARS
    return ShownBody(kind, text, text[:FOLD_CHARS] if folded else text, folded, cut, len(body))


def show_json(value: object) -> str:
    """A JSON value (a KV key's metadata) as indented text, for a ``<pre>``; ``""`` for None."""
    return "" if value is None else json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


# -- migrations -------------------------------------------------------------------------------
RATE_WINDOW_MS = 60_000  # a job's rate is what it did over about the last minute of polls
RATE_JOBS = 1_000  # the jobs whose samples one server keeps (the oldest seen are dropped)


@dataclass(frozen=True, slots=True)
class JobFigures:
    """A migration job's progress as a page shows it: counts, bytes, and the rate and ETA of the
    polls this server has seen (``None`` until it has two samples a second apart)."""

    done_objects: int  # transferred + skipped + failed
    objects: int
    percent: float | None  # of the objects listed, once the listing is finished
    objects_per_s: float | None
    bytes_per_s: float | None
    eta_s: float | None


class RateBook:
    """Recent samples of each job's progress, taken when a page polls it, so a page shows a rate
    and an ETA without the job store keeping a history. Per server and in memory: a page served by
    another server starts its own samples."""

    def __init__(self) -> None:
        self._samples: dict[str, list[tuple[int, int, int]]] = {}
        self._lock = threading.Lock()

    def figures(self, progress: JobProgress, now_ms: int) -> JobFigures:
        done = progress.transferred_objects + progress.skipped_objects + progress.failed_objects
        with self._lock:
            samples = self._samples.pop(progress.id, [])
            samples = [s for s in samples if 0 <= now_ms - s[0] <= RATE_WINDOW_MS]
            samples.append((now_ms, done, progress.transferred_bytes))
            self._samples[progress.id] = samples[-30:]
            while len(self._samples) > RATE_JOBS:
                del self._samples[next(iter(self._samples))]
        first = samples[0]
        seconds = (now_ms - first[0]) / 1000
        running = progress.status == "running"
        objects_rate = (done - first[1]) / seconds if running and seconds >= 1 else None
        bytes_rate = (progress.transferred_bytes - first[2]) / seconds if running and seconds >= 1 else None
        left = progress.objects - done
        eta = left / objects_rate if progress.listing_finished and objects_rate else None
        percent = 100 * done / progress.objects if progress.listing_finished and progress.objects else None
        if progress.status == "completed":
            percent = 100.0
        return JobFigures(done, progress.objects, percent, objects_rate, bytes_rate, eta)


def size(count: float) -> str:
    """Bytes for people: ``0 B``, ``4.0 KiB``, ``1.2 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 5 s``, ``2 h 10 min``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"
