"""The seed's bar, computed from the job table: every job accounted for, no target checked twice
within minutes, no host with two jobs in flight, every listed target checked each day, round
times, failed checks. ``conveyor probe report`` prints it; tests assert on it.

>>> report = prober.fleet.report(since_ms=now_ms - 72 * 3600_000)
>>> report.jobs == report.finished + report.abandoned + report.cancelled + report.open
True
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from conveyor.engine.tables import Row
from conveyor.prober.model import OPEN_STATES, Job, RoundRow

DAY_MS = 86_400_000
DEFAULT_MIN_GAP_MS = 10 * 60 * 1000
RECENT_FAILURES = 10


@dataclasses.dataclass(frozen=True)
class RoundSummary:
    """One round: its jobs by state; ``seconds``: from its first job's claim to its last finished
    check; ``seconds_from_mark``: from its mark (the cron tick, or when it was asked for) to that
    check. Both None until a check of it has finished. ``done``: none of its jobs is open."""

    id: str
    trigger: str
    mark_ms: int
    claimed_ms: int
    messages: int
    per_message: int
    at_a_time: int
    jobs: int
    states: dict[str, int]
    failed: int
    seconds: float | None
    seconds_from_mark: float | None

    @property
    def done(self) -> bool:
        return not any(self.states.get(state, 0) for state in OPEN_STATES)

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "done": self.done}


def summarize_round(row: RoundRow, jobs: Sequence[Job]) -> RoundSummary:
    states: dict[str, int] = defaultdict(int)
    for job in jobs:
        states[job.state] += 1
    finished = [j for j in jobs if j.state == "finished" and j.ended_ms is not None]
    last = max((j.ended_ms for j in finished if j.ended_ms is not None), default=None)
    first = min((j.claimed_ms for j in jobs), default=None)
    return RoundSummary(
        id=row.id,
        trigger=row.trigger,
        mark_ms=row.mark_ms,
        claimed_ms=row.claimed_ms,
        messages=row.shape.messages,
        per_message=row.shape.per_message,
        at_a_time=row.shape.at_a_time,
        jobs=row.jobs,
        states=dict(states),
        failed=sum(1 for j in finished if not j.ok),
        seconds=None if last is None or first is None else (last - first) / 1000,
        seconds_from_mark=None if last is None else (last - row.mark_ms) / 1000,
    )


@dataclasses.dataclass(frozen=True)
class DayCoverage:
    """A UTC day: how many of the targets listed by its end had a finished check in it."""

    day: str
    checked: int
    listed: int


@dataclasses.dataclass(frozen=True)
class Failure:
    address: str
    check: str
    error: str | None
    ended_ms: int


@dataclasses.dataclass(frozen=True)
class Report:
    """The fleet's figures for the jobs claimed from ``since_ms`` to ``until_ms``.

    ``jobs`` claimed; ``runs`` started; each job ends ``finished``, ``abandoned`` (its lease ran out:
    ``abandoned_started`` of them had started, and never recorded a finish) or ``cancelled``, or is
    still ``open`` (``overdue``: past its lease, not swept yet). ``close_targets``: targets with two
    runs less than ``min_gap_seconds`` apart; ``host_overlaps``: hosts that had two jobs in flight at
    once; ``days``: coverage per day; round times in seconds (rounds whose jobs all ended)."""

    fleet: str
    since_ms: int
    until_ms: int
    jobs: int
    runs: int
    finished: int
    abandoned: int
    abandoned_started: int
    cancelled: int
    open: int
    overdue: int
    min_gap_seconds: float
    close_targets: int
    host_overlaps: int
    days: list[DayCoverage]
    rounds: int
    round_median_seconds: float | None
    round_slowest_seconds: float | None
    mark_median_seconds: float | None
    mark_slowest_seconds: float | None
    passed: int
    failed: int
    recent_failures: list[Failure]

    @property
    def accounted(self) -> bool:
        """Every job claimed has ended in a known state or is open within its lease."""
        return self.jobs == self.finished + self.abandoned + self.cancelled + self.open and self.overdue == 0

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "accounted": self.accounted}


def close_targets(jobs: Iterable[Job], min_gap_ms: int) -> int:
    """Targets with two runs that started less than ``min_gap_ms`` apart."""
    starts: dict[str, list[int]] = defaultdict(list)
    for job in jobs:
        if job.started_ms is not None:
            starts[job.target_id].append(job.started_ms)
    close = 0
    for times in starts.values():
        times.sort()
        close += any(b - a < min_gap_ms for a, b in itertools.pairwise(times))
    return close


def host_overlaps(jobs: Iterable[Job], now_ms: int) -> int:
    """Hosts that had two jobs in flight at once (a job is in flight from its claim to its end)."""
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for job in jobs:
        spans[job.host].append((job.claimed_ms, now_ms if job.ended_ms is None else job.ended_ms))
    overlapping = 0
    for host_spans in spans.values():
        host_spans.sort()
        latest_end = None
        for start, end in host_spans:
            if latest_end is not None and start < latest_end:
                overlapping += 1
                break
            latest_end = end if latest_end is None else max(latest_end, end)
    return overlapping


def _days(jobs: Sequence[Job], listed: Sequence[Row], since_ms: int, until_ms: int) -> list[DayCoverage]:
    added = {target_id: int(added_ms) for target_id, added_ms in listed}
    checked: dict[int, set[str]] = defaultdict(set)
    for job in jobs:
        if job.state == "finished" and job.ended_ms is not None and job.target_id in added:
            checked[job.ended_ms // DAY_MS].add(job.target_id)
    days = []
    for day in range(since_ms // DAY_MS, until_ms // DAY_MS + 1):
        day_end = (day + 1) * DAY_MS
        listed_then = sum(1 for ms in added.values() if ms < day_end)
        name = datetime.datetime.fromtimestamp(day * DAY_MS / 1000, datetime.UTC).date().isoformat()
        days.append(DayCoverage(name, len(checked[day]), listed_then))
    return days


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def build_report(
    fleet: str,
    jobs: Sequence[Job],
    rounds: Sequence[RoundRow],
    listed: Sequence[Row],
    *,
    since_ms: int,
    now_ms: int,
    min_gap_ms: int = DEFAULT_MIN_GAP_MS,
) -> Report:
    by_state: dict[str, int] = defaultdict(int)
    for job in jobs:
        by_state[job.state] += 1
    by_round: dict[str, list[Job]] = defaultdict(list)
    for job in jobs:
        by_round[job.round_id].append(job)
    summaries = [summarize_round(row, by_round[row.id]) for row in rounds]
    timed = [s for s in summaries if s.done and s.seconds is not None]
    round_seconds = [s.seconds for s in timed if s.seconds is not None]
    mark_seconds = [s.seconds_from_mark for s in timed if s.seconds_from_mark is not None]
    finished = [j for j in jobs if j.state == "finished"]
    failures = sorted((j for j in finished if not j.ok), key=lambda j: j.ended_ms or 0, reverse=True)
    return Report(
        fleet=fleet,
        since_ms=since_ms,
        until_ms=now_ms,
        jobs=len(jobs),
        runs=sum(1 for j in jobs if j.started_ms is not None),
        finished=by_state["finished"],
        abandoned=by_state["abandoned"],
        abandoned_started=sum(1 for j in jobs if j.state == "abandoned" and j.started_ms is not None),
        cancelled=by_state["cancelled"],
        open=sum(by_state[s] for s in OPEN_STATES),
        overdue=sum(1 for j in jobs if j.state in OPEN_STATES and j.lease_until_ms <= now_ms),
        min_gap_seconds=min_gap_ms / 1000,
        close_targets=close_targets(jobs, min_gap_ms),
        host_overlaps=host_overlaps(jobs, now_ms),
        days=_days(jobs, listed, since_ms, now_ms),
        rounds=len(timed),
        round_median_seconds=_median(round_seconds),
        round_slowest_seconds=max(round_seconds, default=None),
        mark_median_seconds=_median(mark_seconds),
        mark_slowest_seconds=max(mark_seconds, default=None),
        passed=sum(1 for j in finished if j.ok),
        failed=len(failures),
        recent_failures=[Failure(j.address, j.check, j.error, j.ended_ms or 0) for j in failures[:RECENT_FAILURES]],
    )
