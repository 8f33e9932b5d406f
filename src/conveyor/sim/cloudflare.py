"""Cloudflare's consumer ramp, as the model fitted to its measured curve (workloads reference §3).

Nine messages, each holding its consumer 60 s, sent at once: the first started about 2 s after the
send, the second right after the first finished, concurrency peaked at five and the ninth finished
257 s after the send. The model that replays it: one consumer at first; when an invocation
finishes, the next batch starts at once in its place; about 12 s after each finish, one more
invocation is allowed at the same time (up to ``max_concurrency``). Concurrency grows with finished
invocations, not with the backlog: short invocations ramp up fast, long ones slowly.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from conveyor import limits
from conveyor.errors import InvalidSetting
from conveyor.sim.invocations import Invocation, batches

# The fitted constants.
FIRST_START_SECONDS = 2.0
RAMP_STEP_SECONDS = 12.0

_FINISH, _GRANT = 0, 1  # at one instant, finishes free their slots before grants and starts


@dataclass(frozen=True, slots=True)
class CloudflareModel:
    """The fitted ramp: the first invocation ``first_start`` seconds after the send, and one more
    allowed at once ``ramp_step`` seconds after each finish.

    >>> simulate(CloudflareModel(ramp_step=6.0), messages=9, hold=60.0).makespan   # a faster ramp
    248.0
    """

    first_start: float = FIRST_START_SECONDS
    ramp_step: float = RAMP_STEP_SECONDS

    def __post_init__(self) -> None:
        for name in ("first_start", "ramp_step"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
                raise InvalidSetting(f"{name} is {value!r}; it must be a finite number of seconds, 0 or more")


def run_cloudflare(
    model: CloudflareModel,
    holds: Sequence[float],
    batch_size: int,
    batch_timeout: float,
    max_concurrency: int | None,
) -> list[Invocation]:
    """The invocations of ``holds`` (messages sent at time 0) under the fitted ramp."""
    cap = max_concurrency or limits.MAX_CONCURRENCY
    waiting = batches(len(holds), batch_size)
    # A full batch is ready at once; a short one (the last) when its timeout has run from the send.
    ready = [0.0 if len(batch) == batch_size else batch_timeout for batch in waiting]
    events: list[tuple[float, int]] = []
    invocations: list[Invocation] = []
    running, allowed = 0, 1
    now = model.first_start
    while len(invocations) < len(waiting):
        while events and events[0][0] <= now:
            when, kind = heapq.heappop(events)
            if kind == _FINISH:
                running -= 1
                heapq.heappush(events, (when + model.ramp_step, _GRANT))
            else:
                allowed += 1
        while len(invocations) < len(waiting) and running < min(allowed, cap) and ready[len(invocations)] <= now:
            batch = waiting[len(invocations)]
            end = now + sum(holds[i] for i in batch)
            invocations.append(Invocation(now, end, batch))
            running += 1
            heapq.heappush(events, (end, _FINISH))
        if len(invocations) < len(waiting):
            upcoming = [events[0][0]] if events else []
            if ready[len(invocations)] > now:
                upcoming.append(ready[len(invocations)])
            now = min(upcoming)
    return invocations
