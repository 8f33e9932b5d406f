"""Conveyor's own consumer, step by step as ``conveyor.consumer`` runs it, with an engine's costs.

The dispatcher (``consumer/dispatcher.py``) is one thread. Each step it waits until the autoscaler
has room, leases what the batch still needs (idle, the messages of as many batches as there is
room for: ``idle_lease_count``), and launches the batches that are full, or whose first message has
waited ``max_batch_timeout``, while there is room; otherwise it waits out the rest of that timeout.
A handler that returns settles its batch (one commit, which leases the next batch too when the
dispatcher waits for room: a step's cost is then its wake-up and hand-off, less than
``lease_seconds``, which the model still charges), then frees its slot. The autoscaler is the real
:class:`~conveyor.consumer.autoscaler.Autoscaler`: room while fewer than ``max_concurrency`` (250
when automatic) batches run, so the consumer scales to ceil(backlog / batch size) at once. Its fit
to a busy process's rate stays off: a simulated hold computes nothing.

What the code does not fix is what the engine's calls cost, so a :class:`ConveyorModel` carries
three measured figures: how soon an idle dispatcher sees a send, one step's lease and launch, and
one batch's settle.
"""

from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

from conveyor.consumer import autoscaler
from conveyor.consumer.autoscaler import Autoscaler
from conveyor.consumer.dispatcher import idle_lease_count
from conveyor.engine.sqlite.engine import CROSS_PROCESS_POLL_SECONDS
from conveyor.errors import InvalidSetting
from conveyor.sim.invocations import Invocation

# The autoscaler logs each new peak under its queue's name; a simulated one's lines are not news
# (no queue name has parentheses, so no real queue's line is dropped).
SIMULATED_QUEUE = "(simulated)"


class _DropSimulated(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.args, tuple) and record.args[:1] == (SIMULATED_QUEUE,))


autoscaler.log.addFilter(_DropSimulated())


@dataclass(frozen=True, slots=True)
class ConveyorModel:
    """Conveyor's dispatcher and autoscaler on one engine, whose calls cost (in seconds):

    - ``notice_seconds``: from the send's return until the idle dispatcher leases;
    - ``lease_seconds``: one dispatcher step (settings read, lease, hand-off to a handler thread);
    - ``settle_seconds``: a finished batch's ack commit, after which its slot is free.

    The presets are medians measured on a 2-core machine running 40 messages;
    :func:`~conveyor.sim.measure_costs` measures a deployment's own where it runs:

    >>> round(simulate(ConveyorModel.postgresql(), messages=40, hold=0.5, max_concurrency=5).makespan, 3)
    4.057
    """

    engine: str
    notice_seconds: float
    lease_seconds: float
    settle_seconds: float

    def __post_init__(self) -> None:
        for name in ("notice_seconds", "lease_seconds", "settle_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise InvalidSetting(f"{name} is {value!r}; it must be a finite number of seconds, 0 or more")

    @classmethod
    def sqlite(cls, *, sender_in_process: bool = True) -> ConveyorModel:
        """The embedded engine. A send from this process wakes the dispatcher at once; one from
        another process is seen at the dispatcher's next look at the files, every
        ``CROSS_PROCESS_POLL_SECONDS``, half of that on average."""
        notice = 0.0003 + (0.0 if sender_in_process else CROSS_PROCESS_POLL_SECONDS / 2)
        return cls("sqlite", notice, 0.0004, 0.002)

    @classmethod
    def postgresql(cls) -> ConveyorModel:
        """PostgreSQL on the same machine: a send reaches the dispatcher by LISTEN/NOTIFY, and every
        lease and settle is a round trip to the server."""
        return cls("postgresql", 0.010, 0.0015, 0.005)


def run_dispatcher(
    model: ConveyorModel,
    holds: Sequence[float],
    batch_size: int,
    batch_timeout: float,
    max_concurrency: int | None,
) -> list[Invocation]:
    """The invocations of ``holds`` (messages sent at time 0), as the dispatcher would start them."""
    scaler = Autoscaler(SIMULATED_QUEUE, max_concurrency, cpu_seconds=None)
    frees: list[float] = []  # when each running batch's slot is free again: its end and settle
    invocations: list[Invocation] = []
    pending: range = range(0)
    pending_since = 0.0
    leased = 0
    now = model.notice_seconds
    while leased < len(holds) or pending:
        while frees and frees[0] <= now:
            heapq.heappop(frees)
            scaler.finished(failed=False)
        if not scaler.has_room():
            now = frees[0]
            continue
        now += model.lease_seconds
        if pending:
            want = max(0, batch_size - len(pending))
        else:
            want = idle_lease_count(batch_size, scaler.allowed - scaler.running)
        taken = min(want, len(holds) - leased)
        if taken and not pending:
            pending, pending_since = range(leased, leased), now
        pending = range(pending.start, pending.stop + taken)
        leased += taken
        launched = False
        while pending and (len(pending) >= batch_size or now - pending_since >= batch_timeout):
            if launched and not scaler.has_room():
                break  # the rest waits for room
            batch, pending = pending[:batch_size], pending[batch_size:]
            end = now + sum(holds[i] for i in batch)
            invocations.append(Invocation(now, end, batch))
            scaler.started()
            heapq.heappush(frees, end + model.settle_seconds)
            launched = True
        if not launched:  # the dispatcher waits out the batch's timeout (nothing more arrives: all were sent)
            now = pending_since + batch_timeout
    return invocations
