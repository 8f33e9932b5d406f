"""``simulate()``: when each message's invocation starts and ends, under one consumer model.

Every message is sent at once at time 0 (a round's fan-out: one ``send_batch``); the models say
when the consumer takes them. A batch's handler handles its messages one after another, each for
its hold, so a message starts when the ones before it in its batch are done.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from conveyor import limits
from conveyor.errors import InvalidSetting
from conveyor.sim.cloudflare import CloudflareModel, run_cloudflare
from conveyor.sim.dispatcher import ConveyorModel, run_dispatcher
from conveyor.sim.invocations import Invocation, batches

ModelName = Literal["cloudflare", "conveyor"]
MODELS: tuple[ModelName, ...] = ("cloudflare", "conveyor")


@dataclass(frozen=True, slots=True)
class Simulation:
    """One simulated run: times in seconds after the send.

    ``starts[i]`` and ``ends[i]`` are message ``i``'s; ``peak`` is the most invocations (batches)
    running at once (one that takes no time does not count); ``makespan`` is when the last one
    ended; ``model`` names the model. ``invocations`` are the batches' (start, end) in the order
    they started.
    """

    starts: tuple[float, ...]
    ends: tuple[float, ...]
    peak: int
    makespan: float
    model: str
    invocations: tuple[tuple[float, float], ...]

    def concurrency(self) -> list[tuple[float, int]]:
        """The curve of running invocations: ``(time, count from then on)`` at every change.

        >>> simulate("cloudflare", messages=2, hold=60).concurrency()
        [(0.0, 0), (2.0, 1), (122.0, 0)]
        """
        return step_curve(self.invocations)

    def running_at(self, when: float) -> int:
        """Invocations running at ``when`` (one that ends at ``when`` no longer is)."""
        curve = self.concurrency()
        return curve[bisect_right([t for t, _ in curve], when) - 1][1]


def simulate(
    model: ModelName | CloudflareModel | ConveyorModel,
    messages: int = 9,
    hold: float | Sequence[float] = 60.0,
    max_concurrency: int | None = None,
    *,
    max_batch_size: int = 1,
    max_batch_timeout: float = limits.DEFAULT_MAX_BATCH_TIMEOUT,
    handler_timeout: float = limits.DEFAULT_HANDLER_TIMEOUT,
) -> Simulation:
    """Simulate ``messages`` messages sent at once, each holding its consumer for ``hold`` seconds
    (one number, or one per message), under ``model``:

    - ``"cloudflare"`` (or a :class:`CloudflareModel`): the ramp fitted to Cloudflare's measured
      one: one consumer at first, the next message at once when one finishes, one more consumer
      allowed about 12 s after each finish, the first start about 2 s after the send;
    - ``"conveyor"`` (or a :class:`ConveyorModel`, e.g. ``ConveyorModel.postgresql()``): Conveyor's
      own dispatcher and autoscaler (``conveyor.consumer``), with an engine's measured costs.

    ``max_concurrency`` caps the invocations at once (``None``: automatic, up to 250);
    ``max_batch_size`` messages go to one invocation (the default 1: one each), a batch short of it
    waits ``max_batch_timeout`` seconds; a batch must fit in ``handler_timeout``.

    >>> run = simulate("cloudflare", messages=9, hold=60.0)
    >>> [round(s) for s in run.starts], round(run.makespan), run.peak
    ([2, 62, 74, 122, 134, 134, 146, 182, 194], 254, 4)
    >>> round(simulate("conveyor", messages=9, hold=60.0).makespan, 3)   # every message at once
    60.001
    """
    holds = message_holds(messages, hold)
    check_consumer(max_concurrency, max_batch_size, max_batch_timeout, handler_timeout)
    for batch in batches(len(holds), max_batch_size):
        held = sum(holds[i] for i in batch)
        if held > handler_timeout:
            raise InvalidSetting(
                f"messages {batch.start}..{batch.stop - 1} hold their invocation {held:g} s; the handler time limit "
                f"is {handler_timeout:g} s (handler_timeout): past it the batch fails and is retried, "
                "which the simulator does not model"
            )
    chosen = model_named(model)
    if isinstance(chosen, CloudflareModel):
        runs = run_cloudflare(chosen, holds, max_batch_size, max_batch_timeout, max_concurrency)
        name = "cloudflare"
    else:
        runs = run_dispatcher(chosen, holds, max_batch_size, max_batch_timeout, max_concurrency)
        name = "conveyor"
    return _simulation(name, holds, runs)


def model_named(model: object) -> CloudflareModel | ConveyorModel:
    """The model ``model`` names (an instance is itself); an unknown name is an error naming the models."""
    if isinstance(model, CloudflareModel | ConveyorModel):
        return model
    if model == "cloudflare":
        return CloudflareModel()
    if model == "conveyor":
        return ConveyorModel.sqlite()
    raise InvalidSetting(f"model is {model!r}; it must be one of {', '.join(MODELS)} (or a model object)")


def message_holds(messages: int, hold: float | Sequence[float]) -> tuple[float, ...]:
    """``hold`` as one figure per message, each checked: finite, not negative."""
    if isinstance(messages, bool) or not isinstance(messages, int) or messages < 0:
        raise InvalidSetting(f"messages is {messages!r}; it must be a whole number, 0 or more")
    if isinstance(hold, int | float) and not isinstance(hold, bool):
        holds: tuple[float, ...] = (float(hold),) * messages
    elif isinstance(hold, Sequence) and not isinstance(hold, str | bytes):
        if len(hold) != messages:
            raise InvalidSetting(f"hold gives {len(hold)} times for {messages} messages; give one per message")
        holds = tuple(hold)
    else:
        raise InvalidSetting(f"hold is {hold!r}; it must be seconds, or a sequence of seconds, one per message")
    for i, value in enumerate(holds):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise InvalidSetting(f"hold of message {i} is {value!r}; it must be a finite number of seconds, 0 or more")
    return tuple(float(value) for value in holds)


def check_consumer(
    max_concurrency: int | None, max_batch_size: int, max_batch_timeout: float, handler_timeout: float
) -> None:
    """The consumer settings, in the ranges ``@app.consumer`` accepts."""
    if max_concurrency is not None and (
        isinstance(max_concurrency, bool)
        or not isinstance(max_concurrency, int)
        or not 1 <= max_concurrency <= limits.MAX_CONCURRENCY
    ):
        raise InvalidSetting(
            f"max_concurrency is {max_concurrency!r}; it must be None (automatic) or a whole number "
            f"from 1 to {limits.MAX_CONCURRENCY}"
        )
    if (
        isinstance(max_batch_size, bool)
        or not isinstance(max_batch_size, int)
        or not 1 <= max_batch_size <= limits.MAX_BATCH_SIZE
    ):
        raise InvalidSetting(
            f"max_batch_size is {max_batch_size!r}; it must be a whole number from 1 to {limits.MAX_BATCH_SIZE}"
        )
    if (
        isinstance(max_batch_timeout, bool)
        or not isinstance(max_batch_timeout, int | float)
        or not 0 <= max_batch_timeout <= limits.MAX_BATCH_TIMEOUT
    ):
        raise InvalidSetting(
            f"max_batch_timeout is {max_batch_timeout!r}; it must be seconds from 0 to {limits.MAX_BATCH_TIMEOUT:g}"
        )
    if (
        isinstance(handler_timeout, bool)
        or not isinstance(handler_timeout, int | float)
        or not math.isfinite(handler_timeout)
        or handler_timeout <= 0
    ):
        raise InvalidSetting(f"handler_timeout is {handler_timeout!r}; it must be a positive number of seconds")


def _simulation(model: str, holds: tuple[float, ...], runs: list[Invocation]) -> Simulation:
    starts = [0.0] * len(holds)
    ends = [0.0] * len(holds)
    for run in runs:
        at = run.start
        for i in run.messages:
            starts[i], at = _ns(at), at + holds[i]
            ends[i] = _ns(at)
    intervals = tuple((_ns(run.start), _ns(run.end)) for run in runs)
    return Simulation(tuple(starts), tuple(ends), most_open(intervals), max(ends, default=0.0), model, intervals)


def _ns(seconds: float) -> float:
    """To the nanosecond: sums of small costs read 0.0031, not 0.0031000000000000003."""
    return round(seconds, 9)


def step_curve(intervals: Sequence[tuple[float, float]]) -> list[tuple[float, int]]:
    """How many of ``intervals`` are open: ``(time, count from then on)`` at every change, from 0."""
    changes: dict[float, int] = {}
    for start, end in intervals:
        if end > start:
            changes[start] = changes.get(start, 0) + 1
            changes[end] = changes.get(end, 0) - 1
    curve = [(0.0, 0)]
    running = 0
    for when in sorted(changes):
        if changes[when]:
            running += changes[when]
            if when == curve[-1][0]:
                curve[-1] = (when, running)
            else:
                curve.append((when, running))
    return curve


def most_open(intervals: Sequence[tuple[float, float]]) -> int:
    """The most intervals open at once; one that ends when another starts does not overlap it, and
    one that takes no time is never open."""
    edges = sorted([(end, -1) for start, end in intervals if end > start] + [(s, 1) for s, e in intervals if e > s])
    running = peak = 0
    for _, change in edges:
        running += change
        peak = max(peak, running)
    return peak
