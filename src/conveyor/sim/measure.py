"""Measure a deployment's consumer costs, for a :class:`~conveyor.sim.ConveyorModel` of it.

The ``conveyor`` model takes the dispatcher's rules from the code, and three figures from the
engine: how soon an idle dispatcher sees a send, one dispatcher step, one settle. Those depend on
the machine, its load and the engine, so this runs a short burst through a real worker on a scratch
queue and reads them off the handlers' start and end times:

>>> model = measure_costs(cv)          # about a second; the scratch queue is deleted after
>>> model
ConveyorModel(engine='sqlite, measured', notice_seconds=0.0003, lease_seconds=0.0004, settle_seconds=0.0021)
"""

from __future__ import annotations

import secrets
import statistics
import threading
import time

from conveyor.client.sync import Conveyor
from conveyor.consumer.app import App
from conveyor.consumer.batch import MessageBatch
from conveyor.errors import ConveyorError
from conveyor.model import DeliveryPolicy
from conveyor.sim.dispatcher import ConveyorModel

# The burst: WAVES waves of CAP handlers each holding HOLD seconds, long enough that a wave's
# handlers all start before the first of them ends, even on a busy machine.
CAP = 5
WAVES = 4
HOLD = 0.2
# How long the worker gets to start before the burst is sent, and the burst to finish.
SETTLE_IN_SECONDS = 0.1
TIMEOUT_SECONDS = 30.0


class MeasurementTimeout(ConveyorError):
    """The measuring burst did not finish in time: the worker could not run (or the machine is stalled)."""

    code = 15000
    status = 504


def measure_costs(cv: Conveyor) -> ConveyorModel:
    """The ``conveyor`` model with ``cv``'s deployment's costs, measured now.

    One scratch queue (``sim-costs-`` and a random suffix) gets a worker of its own in this process,
    ``max_concurrency=5``, one message per batch; 20 messages sent at once run in four waves, each
    started by one dispatcher step (one lease takes a wave). The step is timed directly, as leases of
    a wave's messages; the first start is the notice and one step, and the gap from a wave's first
    end to the next wave's first start is a settle and a step (medians). The queue is deleted
    afterwards, whatever happens.
    """
    name = f"sim-costs-{secrets.token_hex(4)}"
    cv.create_queue(name)
    try:
        step = _step_seconds(cv, name)
        starts, ends = _burst(cv, name)
    finally:
        cv.delete_queue(name)
    gap = statistics.median(starts[CAP * w] - ends[CAP * (w - 1)] for w in range(1, WAVES))
    return ConveyorModel(
        f"{cv.deployment.kind}, measured",
        notice_seconds=round(max(0.0, starts[0] - step), 6),
        lease_seconds=round(max(0.0, step), 6),
        settle_seconds=round(max(0.0, gap - step), 6),
    )


def _step_seconds(cv: Conveyor, name: str) -> float:
    """One dispatcher step, as the lease of a wave's messages that makes most of it (median)."""
    queue = cv.engine.get_queue(name).queue_id
    policy = DeliveryPolicy()
    times = []
    for _ in range(WAVES):
        cv.queue(name).send_batch([{"body": n} for n in range(CAP)])
        began = time.perf_counter()
        leased = cv.engine.lease(queue, CAP, 30_000, policy)
        times.append(time.perf_counter() - began)
        cv.engine.settle(queue, [m.lease_id for m in leased], [], policy)
    return statistics.median(times)


def _burst(cv: Conveyor, name: str) -> tuple[list[float], list[float]]:
    """Handler start and end times, sorted, in seconds after the burst's send returned."""
    app = App(cv, grace_period=5)
    app.registers_itself = False  # a worker for a second: not one for `conveyor workers list`
    times: list[tuple[float, float]] = []
    lock = threading.Lock()

    @app.consumer(name, max_batch_size=1, max_batch_timeout=0, max_concurrency=CAP)
    def handle(batch: MessageBatch) -> None:
        began = time.perf_counter()
        time.sleep(HOLD)
        ended = time.perf_counter()
        with lock:
            times.append((began, ended))

    count = CAP * WAVES
    app.start()
    try:
        time.sleep(SETTLE_IN_SECONDS)
        cv.queue(name).send_batch([{"body": n} for n in range(count)])
        sent = time.perf_counter()
        deadline = sent + TIMEOUT_SECONDS
        while len(times) < count:
            if time.perf_counter() > deadline:
                raise MeasurementTimeout(
                    f"measuring the consumer's costs: {len(times)} of {count} handlers finished "
                    f"within {TIMEOUT_SECONDS:g} s"
                )
            time.sleep(0.01)
    finally:
        app.stop()
    return sorted(b - sent for b, _ in times), sorted(e - sent for _, e in times)
