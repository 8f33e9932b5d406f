"""What the workflow pages show of an instance: its step timeline as a Gantt (rows of bars placed
in percent of the instance's span, drawn by the server as SVG: attributes, not styles, so the
Content-Security-Policy needs no inline style), and JSON values made safe and small to show."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from typing import Any

from conveyor.errors import InvalidRequest
from conveyor.server.dash.views import SHOW_BYTES
from conveyor.workflows.model import InstanceStatus, StepRecord

RESTART_KINDS = {"step": "do", "sleep": "sleep", "waitForEvent": "waitForEvent"}
MIN_WIDTH = 0.4  # percent: an instant still shows as a sliver


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar of a row: ``kind`` is its CSS class (``ok``, ``failed``, ``running``, ``retry-wait``,
    ``sleep``, ``wait``), ``x`` and ``width`` percent of the span, ``title`` its tooltip."""

    kind: str
    x: float
    width: float
    title: str


@dataclass(frozen=True, slots=True)
class Row:
    """One step of the timeline, with its bars and the errors of its failed attempts."""

    name: str
    type: str
    status: str
    detail: str  # a sleep's length, an event type waited for, a step's attempts
    bars: tuple[Bar, ...]
    took: str
    errors: tuple[tuple[int, str, str], ...]  # attempt number, error name, message
    output: str  # the step's result (or the event a wait took), made safe to show


@dataclass(frozen=True, slots=True)
class Gantt:
    start: str
    end: str
    span: str
    rows: tuple[Row, ...]
    ticks: tuple[tuple[float, str], ...]  # percent, label


def _ms(when: datetime.datetime | None) -> int | None:
    return None if when is None else int(when.timestamp() * 1000)


def duration(ms: float) -> str:
    """``ms`` as a short human duration: 850ms, 12.3s, 4m05s, 2h03m."""
    if ms < 1000:
        return f"{ms:.0f}ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def _iso(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def step_status(step: StepRecord) -> str:
    if step.success is True:
        return "complete"
    if step.success is False:
        return "errored"
    return "waiting" if step.type != "step" else "running"


def gantt(status: InstanceStatus, now_ms: int) -> Gantt:
    """The instance's steps as rows of bars on one time axis, from its creation to its end (or
    now): a step's attempts (succeeded, failed, running) with the retry delays between them, a
    sleep, a wait for an event; each failed attempt's error listed under its row."""
    start = _ms(status.queued) or now_ms
    end = _ms(status.end) or now_ms
    for step in status.steps:
        for when in (step.start, step.end, *(a.end for a in step.attempts)):
            found = _ms(when)
            if found is not None:
                end = max(end, found)
    span = max(1, end - start)

    def bar(kind: str, a: int, b: int | None, title: str) -> Bar:
        b = end if b is None else b
        x = max(0.0, min(100.0, (a - start) * 100 / span))
        width = max(MIN_WIDTH, min(100.0 - x, (b - a) * 100 / span))
        return Bar(kind, round(x, 3), round(width, 3), f"{title}: {duration(max(0, b - a))}")

    rows = []
    for step in status.steps:
        s0 = _ms(step.start) or start
        s1 = _ms(step.end)
        bars: list[Bar] = []
        errors: list[tuple[int, str, str]] = []
        detail = ""
        if step.type == "step":
            previous_end: int | None = None
            for number, attempt in enumerate(step.attempts, 1):
                a0 = _ms(attempt.start) or s0
                if previous_end is not None and a0 > previous_end:
                    bars.append(bar("retry-wait", previous_end, a0, f"retry delay before attempt {number}"))
                a1 = _ms(attempt.end)
                kind = "running" if attempt.success is None else "ok" if attempt.success else "failed"
                bars.append(bar(kind, a0, a1, f"attempt {number} ({kind})"))
                if attempt.error:
                    errors.append((number, str(attempt.error.get("name", "")), str(attempt.error.get("message", ""))))
                previous_end = a1
            if step.success is None and previous_end is not None:
                bars.append(bar("retry-wait", previous_end, None, "retry due"))
            detail = f"{len(step.attempts)} attempt{'s' if len(step.attempts) != 1 else ''}"
        elif step.type == "sleep":
            bars.append(bar("sleep", s0, s1, "sleep"))
            until = step.config.get("until")
            detail = f"sleep until {_iso(until)}" if isinstance(until, int) else "sleep"
        else:
            bars.append(bar("wait", s0, s1, "wait for event"))
            detail = f"wait for {step.config.get('type', 'an event')!s}"
        if step.error and not errors:
            errors.append((0, str(step.error.get("name", "")), str(step.error.get("message", ""))))
        took = duration((s1 if s1 is not None else end) - s0) if step.start else ""
        shown = "" if step.output is None else show_json(step.output)
        rows.append(Row(step.name, step.type, step_status(step), detail, tuple(bars), took, tuple(errors), shown))
    ticks = tuple((round(p, 3), "+" + duration(span * p / 100)) for p in (0.0, 25.0, 50.0, 75.0, 100.0))
    return Gantt(_iso(start), _iso(end), duration(span), tuple(rows), ticks)


def show_json(value: Any) -> str:
    """``value`` as indented JSON text, cut at ``SHOW_BYTES`` (the template escapes it)."""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
    if len(text) > SHOW_BYTES:
        return text[:SHOW_BYTES] + "\n… (cut: shown up to 64 KiB)"
    return text


def restart_points(status: InstanceStatus) -> list[tuple[str, str]]:
    """The steps a restart may start from: ``(value, label)``; the value is ``type:name:count``."""
    points = []
    for step in status.steps:
        name, _, count = step.name.rpartition("-")
        if name and count.isdigit():
            kind = RESTART_KINDS.get(step.type, "do")
            points.append((f"{kind}:{count}:{name}", f"{step.name} ({step.type})"))
    return points


def parse_restart_point(value: str) -> dict[str, Any] | None:
    """The ``from_step`` of a restart form's choice (``""``: from the start)."""
    if not value:
        return None
    kind, _, rest = value.partition(":")
    count, _, name = rest.partition(":")
    if kind not in RESTART_KINDS.values() or not count.isdigit() or not name:
        raise InvalidRequest(f"from_step {value!r} is not a step of this instance")
    return {"name": name, "count": int(count), "type": kind}
