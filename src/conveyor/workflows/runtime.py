"""Running one claimed instance: :class:`WorkflowStep` (and its async twin) over a :class:`Run`.

A run replays the function from the start: a ``step.do`` whose result is stored returns it without
calling its function; the first step without a stored result runs, and from there the function
keeps going in the same worker while steps succeed, each step one fenced write (so step N costs
the same as step 1). A sleep, a retry delay or a wait records its step, has a delayed wake-up
message sent on the workflow's queue and unwinds the function by raising :class:`Suspended` (a
``BaseException``, so a workflow's ``except Exception`` does not catch it): no worker, no thread
is held while an instance waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import functools
import inspect
import json
import logging
import math
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from conveyor import tracing
from conveyor.engine.base import Clock
from conveyor.errors import StorageError
from conveyor.workflows.durations import parse_duration
from conveyor.workflows.errors import (
    InvalidStepConfig,
    NonRetryableError,
    PayloadTooLarge,
    StepTimeout,
    WorkflowStepError,
)
from conveyor.workflows.model import (
    DEFAULT_EVENT_TIMEOUT,
    DEFAULT_STEP_TIMEOUT,
    MAX_PAYLOAD_BYTES,
    MAX_SLEEP_SECONDS,
    Claim,
    ReceivedEvent,
    Retries,
    StepRow,
)
from conveyor.workflows.store import WorkflowStore
from conveyor.workflows.watchdog import WATCHDOG

log = logging.getLogger("conveyor.workflows")

MAX_STEP_NAME = 256
# An attempt still running after this long is recorded as under way.
SHOW_RUNNING_AFTER = 1.0
INTERRUPTED = {"name": "WorkerLost", "message": "the worker running this attempt stopped before it ended"}


class Suspended(BaseException):
    """Unwinds a run whose state is stored: it sleeps, waits, is paused or was fenced."""


class InstanceFailure(BaseException):
    """Errors the instance whatever the workflow catches (the step limit)."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


def encode_json(value: Any, what: str) -> str:
    """``value`` as JSON text of at most 1 MiB; :class:`PayloadTooLarge` otherwise."""
    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise PayloadTooLarge(f"{what} is not JSON-encodable: {exc}") from None
    size = len(text.encode())
    if size > MAX_PAYLOAD_BYTES:
        raise PayloadTooLarge(f"{what} is {size} bytes of JSON; the limit is {MAX_PAYLOAD_BYTES} (1 MiB)")
    return text


def error_of(exc: BaseException) -> dict[str, str]:
    name = getattr(exc, "name", None)
    message = getattr(exc, "message", None) if isinstance(exc, WorkflowStepError | InstanceFailure) else None
    return {
        "name": name if isinstance(name, str) else type(exc).__name__,
        "message": message if isinstance(message, str) else str(exc),
    }


def check_step_name(name: object) -> str:
    if (
        not isinstance(name, str)
        or not name
        or len(name) > MAX_STEP_NAME
        or any(ord(c) < 32 or ord(c) == 127 for c in name)
    ):
        raise InvalidStepConfig(
            f"invalid step name {name!r}: use 1 to {MAX_STEP_NAME} characters without control characters"
        )
    return name


def check_retries(retries: object) -> tuple[Retries, float]:
    if not isinstance(retries, Retries):
        raise InvalidStepConfig(f"retries is {retries!r}; give conveyor.Retries(limit=, delay=, backoff=)")
    if isinstance(retries.limit, bool) or not isinstance(retries.limit, int) or retries.limit < 0:
        raise InvalidStepConfig(f"retries.limit is {retries.limit!r}; it must be a whole number >= 0")
    if retries.backoff not in ("constant", "linear", "exponential"):
        raise InvalidStepConfig(f"retries.backoff is {retries.backoff!r}; use constant, linear or exponential")
    return retries, parse_duration(retries.delay, "retries.delay")


StepConfig = tuple[Retries, float, float, str]
# Checked step settings by their values and types (True is 1 to a dict, not to the checks), so
# that the steps of a loop check theirs once.
_CONFIGS: dict[tuple[object, ...], StepConfig] = {}
_MAX_CONFIGS = 1_024


def step_config(retries: Retries | None, timeout: float | str | None) -> StepConfig:
    """``step.do``'s settings, checked: the retries, their delay and the timeout in seconds, and
    the config JSON that ``status()`` shows."""
    given = Retries() if retries is None else retries
    key: tuple[object, ...] | None = None
    if type(given) is Retries:
        key = tuple((value, type(value)) for value in (given.limit, given.delay, given.backoff, timeout))
        try:
            return _CONFIGS[key]
        except (KeyError, TypeError):  # TypeError: a value that cannot be hashed (refused below)
            pass
    chosen, delay = check_retries(given)
    seconds = parse_duration(DEFAULT_STEP_TIMEOUT if timeout is None else timeout, "timeout")
    config = {
        "retries": {"limit": chosen.limit, "delay": delay * 1000, "backoff": chosen.backoff},
        "timeout": seconds * 1000,
    }
    checked = (chosen, delay, seconds, json.dumps(config))
    if key is not None and len(_CONFIGS) < _MAX_CONFIGS:
        _CONFIGS[key] = checked
    return checked


@dataclasses.dataclass
class _Do:
    """A ``step.do`` between attempts."""

    key: str
    seq: int
    name: str
    retries: Retries
    delay: float
    timeout: float
    config: str
    start_ms: int
    attempts: list[dict[str, Any]]
    done: bool = False
    value: Any = None


class Run:
    """One claimed run of one instance: the stored steps, the occurrence counters, the fenced writes.

    ``wake(wake_at_ms)`` sends the instance's delayed wake-up message; ``max_steps`` bounds the
    ``do`` and ``wait_for_event`` steps (sleeps do not count, as on Cloudflare); ``let_go(error)``
    settles the run's message while its thread is still busy (an attempt that overran its timeout:
    :meth:`hand_on`), acked if ``error`` is None, delivered again otherwise.
    """

    def __init__(
        self,
        store: WorkflowStore,
        claim: Claim,
        clock: Clock,
        wake: Callable[[int], None],
        max_steps: int,
        let_go: Callable[[BaseException | None], None],
    ) -> None:
        self.store = store
        self.row = claim.instance
        self.clock = clock
        self.wake = wake
        self.max_steps = max_steps
        self.let_go = let_go
        self.stored = {s.key: s for s in claim.steps}
        self._counts: dict[tuple[str, str], int] = {}
        self._seq = 0
        self._counted = 0
        # Whether a step this run saved waits for the flush that makes it durable (see synced).
        self._unsynced = False

    # -- bookkeeping --------------------------------------------------------------------------
    def _key(self, type: str, name: str, counts: bool) -> tuple[str, int]:
        check_step_name(name)
        n = self._counts.get((type, name), 0) + 1
        self._counts[(type, name)] = n
        self._seq += 1
        if counts:
            self._counted += 1
            if self._counted > self.max_steps:
                raise InstanceFailure(
                    "StepLimitExceeded", f"the workflow ran more than its limit of {self.max_steps} steps"
                )
        return f"{type}:{name}:{n}", self._seq

    def _save(self, step: StepRow) -> None:
        """Store ``step``: durably, or, in a store that ``syncs_later``, committed with its flush
        left to the run's next durable write or to :meth:`synced`."""
        row = self.row
        later = self.store.syncs_later
        status = self.store.save_step(
            row.account, row.workflow, row.id, row.epoch, step, run_token=row.run_token, durable=not later
        )
        if status is None:
            raise Suspended("fenced: another run owns this instance now")
        self._unsynced = later
        self.stored[step.key] = step
        if status == "waitingForPause":
            self.suspend(self.clock.now_ms(), None)

    def synced(self) -> None:
        """Make the steps this run saved durable, before an attempt's function runs. A step's
        flush waits until then (or until the run suspends or ends, whose durable write flushes it
        too), so that a 1-step instance pays one flush, for its end; and no longer, so that after
        a power failure a step runs again only if it was the last: never after a later one's
        effects. (Costs nothing when a flush since covered the step.)"""
        if self._unsynced:
            self.store.sync()
            self._unsynced = False

    def suspend(self, wake_at_ms: int, waiting_for: str | None) -> None:
        """Send the wake-up, store the wait, unwind; returns only if an awaited event is already there."""
        self.wake(wake_at_ms)
        outcome = self.store.suspend(
            self.row.account,
            self.row.workflow,
            self.row.id,
            self.row.epoch,
            wake_at_ms,
            waiting_for,
            self.clock.now_ms(),
            run_token=self.row.run_token,
        )
        if outcome != "event":
            raise Suspended(outcome or "fenced")

    # -- step.do ------------------------------------------------------------------------------
    def begin_do(self, name: str, retries: Retries | None, timeout: float | str | None) -> _Do:
        key, seq = self._key("step", name, True)
        chosen, delay, seconds, config = step_config(retries, timeout)
        now = self.clock.now_ms()
        plan = _Do(key, seq, name, chosen, delay, seconds, config, now, [])
        stored = self.stored.get(key)
        if stored is None:
            return plan
        if stored.status == "complete":
            plan.done, plan.value = True, json.loads(stored.output or "null")
            return plan
        plan.attempts = json.loads(stored.attempts)
        plan.start_ms = stored.start_ms
        if stored.status == "errored":
            raise WorkflowStepError(**plan.attempts[-1]["error"])
        if plan.attempts and "end" not in plan.attempts[-1]:
            # Started and never ended: its worker died (or lost its lease) during it. Shown, not
            # counted against the retries: the step runs again.
            plan.attempts[-1].update(end=None, success=False, interrupted=True, error=INTERRUPTED)
        retry_at = plan.attempts[-1].get("retry_at", 0) if plan.attempts else 0
        if retry_at > now:
            self.suspend(retry_at, None)
        return plan

    @contextlib.contextmanager
    def attempt(self, plan: _Do) -> Iterator[list[dict[str, str]]]:
        """The trace context of one attempt of ``plan`` (a ``step`` span, with OpenTelemetry, under
        the run's); yields the list the messages it sends are noted in."""
        sent: list[dict[str, str]] = []
        run = tracing.current() or tracing.TraceContext(
            self.row.traceparent or tracing.make(self.row.trace_id), self.row.workflow, self.row.id
        )
        number = sum(1 for a in plan.attempts if not a.get("interrupted")) + 1
        attributes = {
            "conveyor.workflow": self.row.workflow,
            "conveyor.instance": self.row.id,
            "conveyor.step": plan.key,
            "conveyor.attempt": number,
        }
        ctx = tracing.TraceContext(run.traceparent, run.workflow, run.instance, plan.key, run.queue, run.message, sent)
        with tracing.activate(ctx, f"step {plan.name}", attributes):
            yield sent

    def show_attempt(self, plan: _Do, started_ms: int, sent: list[dict[str, str]]) -> bool:
        """Record that an attempt is under way (not durably: it only shows), for one that runs
        longer than ``SHOW_RUNNING_AFTER``: status() shows it, and an attempt whose worker dies
        is then seen as interrupted (with the messages it had ``sent`` by then). Fast attempts cost
        no write. False if the run was fenced (its later writes are refused as well)."""
        noted = {"messages": list(sent)} if sent else {}
        attempts = json.dumps([*plan.attempts, {"start": started_ms, **noted}])
        step = StepRow(
            plan.key, plan.seq, "step", plan.name, "running", None, attempts, plan.config, plan.start_ms, None
        )
        row = self.row
        saved = self.store.save_step(
            row.account, row.workflow, row.id, row.epoch, step, run_token=row.run_token, durable=False
        )
        return saved is not None

    def hand_on(self, plan: _Do, started_ms: int, sent: list[dict[str, str]]) -> None:
        """The attempt ran past its timeout and its function still holds the run's thread: record
        it as failed and suspend the instance, due when its retry is (or at once, when the step
        has failed for good: the next run raises its error in the workflow), so that another run
        goes on from there; then let go of the run's message. Called by the watchdog; the run's
        thread raises :class:`Suspended` once the function returns."""
        timeout = StepTimeout(f"the attempt ran past its timeout of {plan.timeout:g} s")
        failure: BaseException | None = None
        try:
            self.end_attempt(plan, started_ms, None, timeout, list(sent), handing_on=True)
        except (Suspended, WorkflowStepError):
            pass  # suspended (or fenced: another run owns the instance now)
        except StorageError as exc:
            # Not stored: the message comes back, and its next delivery takes the run over (the
            # attempt then shows as interrupted and runs again).
            log.warning("workflow %s: instance %s: could not hand the run on: %s", self.row.workflow, self.row.id, exc)
            failure = exc
        self.let_go(failure)

    def end_attempt(
        self,
        plan: _Do,
        started_ms: int,
        value: Any,
        error: BaseException | None,
        sent: list[dict[str, str]],
        *,
        handing_on: bool = False,
    ) -> None:
        """Record one attempt (with the messages it ``sent``): the result (``plan.done``), a retry
        now, or a suspension for a later one (always a suspension when ``handing_on``: this
        thread is not the run's)."""
        now = self.clock.now_ms()
        noted = {"messages": sent} if sent else {}
        if error is None:
            try:
                output = encode_json(value, f"the result of step {plan.name!r}")
            except PayloadTooLarge as exc:
                error = exc
            else:
                plan.attempts.append({"start": started_ms, "end": now, "success": True, **noted})
                self._save(self._row(plan, "complete", output, now))
                plan.done, plan.value = True, json.loads(output)
                return
        attempt = sum(1 for a in plan.attempts if not a.get("interrupted")) + 1
        plan.attempts.append({"start": started_ms, "end": now, "success": False, "error": error_of(error), **noted})
        final = isinstance(error, NonRetryableError | PayloadTooLarge) or attempt > plan.retries.limit
        if final:
            self._save(self._row(plan, "errored", None, now))
            if handing_on:
                self.suspend(now, None)
            raise WorkflowStepError(**plan.attempts[-1]["error"])
        wait_ms = math.ceil(plan.retries.delay_after(attempt, plan.delay) * 1000)
        plan.attempts[-1]["retry_at"] = now + wait_ms
        self._save(self._row(plan, "running", None, None))
        if wait_ms > 0 or handing_on:
            self.suspend(now + wait_ms, None)

    def _row(self, plan: _Do, status: str, output: str | None, end: int | None) -> StepRow:
        return StepRow(
            plan.key,
            plan.seq,
            "step",
            plan.name,
            status,
            output,
            json.dumps(plan.attempts),
            plan.config,
            plan.start_ms,
            end,
        )

    # -- sleeps -------------------------------------------------------------------------------
    def sleep_until(self, name: str, until_ms: int) -> None:
        key, seq = self._key("sleep", name, False)
        now = self.clock.now_ms()
        stored = self.stored.get(key)
        if stored is not None and stored.status == "complete":
            return
        if stored is not None:
            until_ms = json.loads(stored.config)["until"]
        if until_ms - now > MAX_SLEEP_SECONDS * 1000:
            raise InvalidStepConfig(f"sleep {name!r} is {(until_ms - now) / 1000:.0f} s; the limit is 365 days")
        start = stored.start_ms if stored is not None else now
        config = json.dumps({"until": until_ms})
        if now >= until_ms:
            self._save(StepRow(key, seq, "sleep", name, "complete", None, "[]", config, start, now))
            return
        if stored is None:
            self._save(StepRow(key, seq, "sleep", name, "running", None, "[]", config, start, None))
        self.suspend(until_ms, None)

    # -- events -------------------------------------------------------------------------------
    def wait_for_event(self, name: str, type: str, timeout: float | str) -> ReceivedEvent:
        if not isinstance(type, str) or not type or len(type) > 100:
            raise InvalidStepConfig(f"event type {type!r} is invalid: use 1 to 100 characters")
        seconds = parse_duration(timeout, "timeout")
        key, seq = self._key("waitForEvent", name, True)
        now = self.clock.now_ms()
        stored = self.stored.get(key)
        if stored is not None and stored.status == "complete":
            return _received(stored.output)
        if stored is not None and stored.status == "errored":
            raise WorkflowStepError(**json.loads(stored.attempts)[-1]["error"])
        deadline = json.loads(stored.config)["deadline"] if stored is not None else now + math.ceil(seconds * 1000)
        config = json.dumps({"type": type, "timeout": seconds * 1000, "deadline": deadline})
        step = StepRow(
            key, seq, "waitForEvent", name, "running", None, "[]", config, stored.start_ms if stored else now, None
        )
        while True:
            # Stored complete, with its end, by the same transaction that takes the event: the
            # wait's one write (a pause asked for meanwhile is taken at the next step's write).
            taking = dataclasses.replace(step, end_ms=self.clock.now_ms())
            row = self.row
            found, event = self.store.take_event(
                row.account, row.workflow, row.id, row.epoch, taking, type, run_token=row.run_token
            )
            if not found:
                raise Suspended("fenced")
            if event is not None:
                output = json.dumps(
                    {"type": type, "payload": json.loads(event.payload), "timestamp": event.timestamp_ms}
                )
                self.stored[key] = dataclasses.replace(taking, status="complete", output=output)
                return _received(output)
            now = self.clock.now_ms()
            if now >= deadline:
                error = {"name": "WorkflowTimeoutError", "message": f"no {type!r} event within {seconds:g} s"}
                attempts = json.dumps([{"start": step.start_ms, "end": now, "success": False, "error": error}])
                self._save(dataclasses.replace(step, status="errored", attempts=attempts, end_ms=now))
                raise WorkflowStepError(**error)
            if key not in self.stored:
                self._save(step)
            self.suspend(deadline, type)


def _received(output: str | None) -> ReceivedEvent:
    data = json.loads(output or "{}")
    when = datetime.datetime.fromtimestamp(data["timestamp"] / 1000, datetime.UTC)
    return ReceivedEvent(data["type"], data["payload"], when)


def _until_ms(when: object, what: str) -> int:
    if isinstance(when, datetime.datetime):
        if when.tzinfo is None:
            raise InvalidStepConfig(f"{what} is a naive datetime; give one with a time zone (datetime.UTC)")
        return math.ceil(when.timestamp() * 1000)
    if isinstance(when, int | float) and not isinstance(when, bool) and math.isfinite(when):
        return math.ceil(when * 1000)
    raise InvalidStepConfig(f"{what} is {when!r}; give a datetime or epoch seconds")


def run_attempt(
    fn: Callable[[], Any], timeout: float, on_slow: Callable[[], object], on_overrun: Callable[[], object]
) -> tuple[Any, BaseException | None]:
    """Run a sync step function on this thread under the watchdog: ``fn()``'s value or exception
    (:class:`StepTimeout` if it returned past ``timeout``). ``on_slow()`` is called once it has run
    ``SHOW_RUNNING_AFTER``; ``on_overrun()`` once it has run past ``timeout``, to hand the run on,
    and then this raises :class:`Suspended` when ``fn`` returns, whatever it returned."""
    watch = WATCHDOG.watch(timeout, SHOW_RUNNING_AFTER, on_slow, on_overrun)
    try:
        value, error = fn(), None
    except Exception as exc:
        value, error = None, exc
    finally:
        handed_on = not WATCHDOG.end(watch)
    if handed_on:
        raise Suspended("the attempt ran past its timeout and its run was handed on")
    if watch.overran():
        return None, StepTimeout(f"the attempt ran past its timeout of {timeout:g} s")
    return value, error


class WorkflowStep:
    """What a workflow function gets as ``step``: durable steps, sleeps and waits.

    >>> meta = step.do("fetch metadata", lambda: fetch(name), retries=conveyor.Retries(limit=3), timeout="1 minute")
    >>> step.sleep("cool down", "1 hour")
    >>> done = step.wait_for_event("compressed", type="file-compressed", timeout="24 hours")
    """

    def __init__(self, run: Run) -> None:
        self._run = run

    def do(
        self, name: str, fn: Callable[[], Any], *, retries: Retries | None = None, timeout: float | str | None = None
    ) -> Any:
        """Run ``fn()`` durably: its JSON result is stored once and returned again on every replay.
        A failing attempt is retried by ``retries`` (default ``Retries()``: 5 retries, 10 s,
        exponential); when they run out, or on :class:`NonRetryableError`, raises
        :class:`WorkflowStepError` here."""
        plan = self._run.begin_do(name, retries, timeout)
        while not plan.done:
            self._run.synced()
            started = self._run.clock.now_ms()
            with self._run.attempt(plan) as sent:
                value, error = run_attempt(
                    fn,
                    plan.timeout,
                    functools.partial(self._run.show_attempt, plan, started, sent),
                    functools.partial(self._run.hand_on, plan, started, sent),
                )
                tracing.mark_error(error)
            self._run.end_attempt(plan, started, value, error, sent)
        return plan.value

    def sleep(self, name: str, duration: float | str) -> None:
        """Sleep ``duration`` (seconds or ``"1 hour"``, up to 365 days) without holding a worker."""
        seconds = parse_duration(duration, f"sleep {name!r}")
        self._run.sleep_until(name, self._run.clock.now_ms() + math.ceil(seconds * 1000))

    def sleep_until(self, name: str, when: datetime.datetime | float) -> None:
        """Sleep until ``when`` (an aware datetime or epoch seconds), at most 365 days ahead."""
        self._run.sleep_until(name, _until_ms(when, f"sleep_until {name!r}"))

    def wait_for_event(self, name: str, *, type: str, timeout: float | str = DEFAULT_EVENT_TIMEOUT) -> ReceivedEvent:
        """The next event of ``type`` sent to this instance (buffered ones first, oldest first);
        raises :class:`WorkflowStepError` (``WorkflowTimeoutError``) after ``timeout``."""
        return self._run.wait_for_event(name, type, timeout)


class AsyncWorkflowStep:
    """``step`` of an ``async def`` workflow: the same steps, awaited; ``do`` takes a plain or an
    ``async`` function."""

    def __init__(self, run: Run) -> None:
        self._run = run

    async def do(
        self,
        name: str,
        fn: Callable[[], Any] | Callable[[], Awaitable[Any]],
        *,
        retries: Retries | None = None,
        timeout: float | str | None = None,
    ) -> Any:
        plan = self._run.begin_do(name, retries, timeout)
        while not plan.done:
            self._run.synced()
            started = self._run.clock.now_ms()
            with self._run.attempt(plan) as sent:
                value, error = await self._attempt(plan, fn, started, sent)
                tracing.mark_error(error)
            self._run.end_attempt(plan, started, value, error, sent)
        return plan.value

    async def _attempt(
        self,
        plan: _Do,
        fn: Callable[[], Any] | Callable[[], Awaitable[Any]],
        started: int,
        sent: list[dict[str, str]],
    ) -> tuple[Any, BaseException | None]:
        work = asyncio.ensure_future(fn() if inspect.iscoroutinefunction(fn) else asyncio.to_thread(fn))
        first = min(plan.timeout, SHOW_RUNNING_AFTER)
        done, _ = await asyncio.wait({work}, timeout=first)
        if not done and plan.timeout > first:
            if not self._run.show_attempt(plan, started, sent):
                work.cancel()
                raise Suspended("fenced: another run owns this instance now")
            done, _ = await asyncio.wait({work}, timeout=plan.timeout - first)
        if not done:
            work.cancel()
            return None, StepTimeout(f"the attempt ran past its timeout of {plan.timeout:g} s")
        failure = work.exception()
        if failure is None:
            return work.result(), None
        if isinstance(failure, Exception):
            return None, failure
        raise failure

    async def sleep(self, name: str, duration: float | str) -> None:
        seconds = parse_duration(duration, f"sleep {name!r}")
        self._run.sleep_until(name, self._run.clock.now_ms() + math.ceil(seconds * 1000))

    async def sleep_until(self, name: str, when: datetime.datetime | float) -> None:
        self._run.sleep_until(name, _until_ms(when, f"sleep_until {name!r}"))

    async def wait_for_event(
        self, name: str, *, type: str, timeout: float | str = DEFAULT_EVENT_TIMEOUT
    ) -> ReceivedEvent:
        return self._run.wait_for_event(name, type, timeout)
