"""One trace across queue → workflow → step: W3C trace context, what runs now, and spans.

A *traceparent* is W3C's ``00-<trace id: 32 hex>-<parent span id: 16 hex>-<flags: 2 hex>``.
Conveyor keeps the current one in a context variable (:func:`current`), set while a workflow runs
(the instance's trace), while a step attempt runs, and while a push handler handles a batch of one
message (the message's); a message sent then carries it (``m.traceparent`` on delivery), and an
instance created then belongs to the same trace and records where it came from.

With OpenTelemetry: when the application has imported ``opentelemetry.trace`` (it does so to
configure an SDK), its current span is the current context, and Conveyor opens spans of its own
(``send``, ``workflow run``, ``step attempt``) through the API, parented on the stored
traceparents. Without it, nothing is imported and no span is made (only the context variable).

>>> with conveyor.tracing.use("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"):
...     q.send({"n": 1})              # delivered with that trace id in m.traceparent
>>> handler.addFilter(conveyor.tracing.TraceLogFilter())   # %(trace_id)s in every log line
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import re
import secrets
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from conveyor.errors import InvalidRequest

TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})\Z")
TRACE_ID = re.compile(r"^[0-9a-f]{32}\Z")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
TRACER_NAME = "conveyor"


@dataclasses.dataclass(frozen=True, slots=True)
class TraceContext:
    """What runs now: its ``traceparent``, and the workflow instance (and step key) or the queue
    message (queue name, message id) on whose behalf, for the origin of instances created now.
    ``sent`` collects the messages sent during a step attempt, recorded with the attempt."""

    traceparent: str
    workflow: str | None = None
    instance: str | None = None
    step: str | None = None
    queue: str | None = None
    message: str | None = None
    sent: list[dict[str, str]] | None = None

    @property
    def trace_id(self) -> str:
        return self.traceparent[3:35]


_current: contextvars.ContextVar[TraceContext | None] = contextvars.ContextVar("conveyor_trace", default=None)


def check_traceparent(value: object, what: str = "traceparent", error: type[InvalidRequest] = InvalidRequest) -> str:
    """``value`` if it is a valid W3C traceparent (version 00), else ``error`` naming ``what``."""
    found = TRACEPARENT.match(value) if isinstance(value, str) else None
    if found is None or found[1] != "00" or found[2] == _ZERO_TRACE or found[3] == _ZERO_SPAN:
        raise error(
            f"{what} is {value!r}; a W3C traceparent is '00-' + 32 hex (the trace id, not all zero) + '-' "
            "+ 16 hex (the parent span id, not all zero) + '-' + 2 hex (flags), lowercase"
        )
    return value  # type: ignore[return-value]


def new_trace_id() -> str:
    return secrets.token_hex(16)


def make(trace_id: str, span_id: str | None = None, flags: str = "01") -> str:
    """A traceparent of ``trace_id`` and ``span_id`` (a new one if None)."""
    return f"00-{trace_id}-{span_id or secrets.token_hex(8)}-{flags}"


def child(traceparent: str) -> str:
    """The same trace, flags kept, with a new span id: the traceparent of work done under it."""
    return f"{traceparent[:36]}{secrets.token_hex(8)}{traceparent[52:]}"


def trace_id_of(traceparent: str | None) -> str | None:
    return None if traceparent is None else traceparent[3:35]


def _otel() -> ModuleType | None:
    """OpenTelemetry's trace API if the application imported it (never imported here)."""
    return sys.modules.get("opentelemetry.trace")


def _otel_traceparent(otel: ModuleType) -> str | None:
    sc = otel.get_current_span().get_span_context()
    if not sc.is_valid:
        return None
    return f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{int(sc.trace_flags):02x}"


def current() -> TraceContext | None:
    """What runs now (None outside a run, a step, a traced handler or :func:`use`)."""
    return _current.get()


def current_traceparent() -> str | None:
    """The traceparent work done now belongs to: OpenTelemetry's current span if there is one,
    else Conveyor's current context, else None."""
    return _traceparent(_otel())


def _traceparent(otel: ModuleType | None) -> str | None:
    """:func:`current_traceparent`, with OpenTelemetry's module already looked up."""
    if otel is not None:
        found = _otel_traceparent(otel)
        if found is not None:
            return found
    ctx = _current.get()
    return None if ctx is None else ctx.traceparent


@contextlib.contextmanager
def use(traceparent: str) -> Iterator[TraceContext]:
    """Run the block in the trace of ``traceparent`` (checked): messages sent and instances created
    in it carry that trace id."""
    check_traceparent(traceparent)
    with activate(TraceContext(traceparent)) as ctx:
        yield ctx


@contextlib.contextmanager
def activate(
    ctx: TraceContext, span: str | None = None, attributes: dict[str, Any] | None = None, kind: str = "INTERNAL"
) -> Iterator[TraceContext]:
    """Make ``ctx`` current for the block; with OpenTelemetry and a ``span`` name, inside a span of
    that name whose parent is ``ctx.traceparent`` (the context then carries the span's own)."""
    otel = _otel() if span is not None else None
    if otel is None or span is None:
        token = _current.set(ctx)
        try:
            yield ctx
        finally:
            _current.reset(token)
        return
    with _span(otel, span, ctx.traceparent, attributes, kind) as traceparent:
        inner = dataclasses.replace(ctx, traceparent=traceparent or ctx.traceparent)
        token = _current.set(inner)
        try:
            yield inner
        finally:
            _current.reset(token)


@contextlib.contextmanager
def _span(
    otel: ModuleType, name: str, parent: str | None, attributes: dict[str, Any] | None, kind: str
) -> Iterator[str | None]:
    """An OpenTelemetry span under ``parent`` (the current span when None or when it is the
    current one); yields its traceparent (the parent's when the span records nothing)."""
    context = None
    if parent is not None and parent != _otel_traceparent(otel):
        sc = otel.SpanContext(
            int(parent[3:35], 16),
            int(parent[36:52], 16),
            is_remote=True,
            trace_flags=otel.TraceFlags(int(parent[53:], 16)),
        )
        context = otel.set_span_in_context(otel.NonRecordingSpan(sc))
    tracer = otel.get_tracer(TRACER_NAME)
    # Errors are marked here, not by the API: a run that unwinds to sleep or wait (a BaseException
    # that is no Exception) has not failed.
    with tracer.start_as_current_span(
        name,
        context=context,
        kind=getattr(otel.SpanKind, kind),
        attributes=attributes or {},
        record_exception=False,
        set_status_on_exception=False,
    ):
        try:
            yield _otel_traceparent(otel) or parent
        except Exception as exc:
            mark_error(exc)
            raise


class Sending:
    """Around a send to ``queue``: yields the traceparent its messages carry (a ``send`` span's,
    with OpenTelemetry; else the current one, or None). A class, not a generator: every send
    passes through it, and without OpenTelemetry it costs two lookups."""

    __slots__ = ("_queue", "_span")

    def __init__(self, queue: str) -> None:
        self._queue = queue
        self._span: contextlib.AbstractContextManager[str | None] | None = None

    def __enter__(self) -> str | None:
        otel = _otel()
        parent = _traceparent(otel)
        if otel is None:
            return parent
        attributes = {"messaging.system": "conveyor", "messaging.destination.name": self._queue}
        self._span = _span(otel, f"send {self._queue}", parent, attributes, "PRODUCER")
        return self._span.__enter__()

    def __exit__(self, *exc: Any) -> bool | None:
        if self._span is None:
            return None
        return self._span.__exit__(*exc)


def mark_error(error: BaseException | None) -> None:
    """Mark the current OpenTelemetry span failed by ``error`` (nothing without one or an error)."""
    otel = _otel()
    if otel is None or error is None:
        return
    span = otel.get_current_span()
    span.record_exception(error)
    span.set_status(otel.Status(otel.StatusCode.ERROR, f"{type(error).__name__}: {error}"))


def record_sent(queue: str, ids: list[str]) -> None:
    """Note messages sent by the running step attempt (shown in its trace tree)."""
    ctx = _current.get()
    if ctx is not None and ctx.sent is not None:
        ctx.sent.extend({"queue": queue, "id": i} for i in ids)


class TraceLogFilter(logging.Filter):
    """Sets ``record.trace_id`` (the current trace id, or ``-``) on every record, for
    ``%(trace_id)s`` in a format or a JSON field: every log line of a run names its trace."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.trace_id = trace_id_of(current_traceparent()) or "-"
        return True
