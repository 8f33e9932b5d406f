"""The ``conveyor`` model against the real system: predictions written down first, then a real
``conveyor.App`` on a real deployment runs the same messages, and every start, every end, the peak
and the makespan must be within max(10 %, 100 ms) of the prediction.

Times are taken in the handler (its first and last line) relative to the return of the one
``send_batch`` that sent every message, as the simulator counts them; messages are compared in
the order they started, since which message a lease hands out first is the engine's business.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import conveyor
from conveyor.sim import ConveyorModel, Simulation, simulate
from conveyor.sim.simulation import most_open
from tests.engine.postgres.support import fresh_client
from tests.waiting import wait_for

MESSAGES = 40
HOLD = 0.5
BATCH_SIZE, BATCH_TIMEOUT = 1, 0.0
CAPS = (None, 5)  # automatic, and capped


def tolerance(measured: float) -> float:
    return max(0.10 * abs(measured), 0.100)


@dataclass
class Measured:
    starts: list[float]
    ends: list[float]

    @property
    def peak(self) -> int:
        return most_open(list(zip(self.starts, self.ends, strict=True)))

    @property
    def makespan(self) -> float:
        return max(self.ends)


@pytest.fixture(params=["sqlite", "postgres"])
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[conveyor.Conveyor, ConveyorModel]]:
    if request.param == "sqlite":
        cv, model = conveyor.connect(f"sqlite://{tmp_path / 'data'}"), ConveyorModel.sqlite()
    else:
        cv, model = fresh_client(), ConveyorModel.postgresql()
    yield cv, model
    cv.close()


def run_for_real(cv: conveyor.Conveyor, queue: str, max_concurrency: int | None) -> Measured:
    """Start a worker, let its dispatcher go idle, send every message at once, time each handler."""
    q = cv.create_queue(queue)
    app = conveyor.App(cv, grace_period=5)
    times: list[tuple[float, float]] = []
    lock = threading.Lock()

    @app.consumer(queue, max_concurrency=max_concurrency, max_batch_size=BATCH_SIZE, max_batch_timeout=BATCH_TIMEOUT)
    def handle(batch: conveyor.MessageBatch) -> None:
        began = time.perf_counter()
        time.sleep(HOLD)
        ended = time.perf_counter()
        with lock:
            times.append((began, ended))

    app.start()
    try:
        time.sleep(0.3)  # the dispatcher is waiting for messages, as a worker between rounds is
        q.send_batch([{"body": n} for n in range(MESSAGES)])
        sent = time.perf_counter()
        wait_for(lambda: len(times) == MESSAGES, timeout=30, what=f"{MESSAGES} handlers to finish")
    finally:
        app.stop()
    return Measured([b - sent for b, _ in times], [e - sent for _, e in times])


def compare(predicted: Simulation, measured: Measured) -> list[tuple[str, float, float]]:
    """(what, predicted, measured) for everything that is off by more than its tolerance."""
    in_order = [
        ("start", sorted(predicted.starts), sorted(measured.starts)),
        ("end", sorted(predicted.ends), sorted(measured.ends)),
    ]
    pairs = [(f"{kind} #{i}", p, m) for kind, ps, ms in in_order for i, (p, m) in enumerate(zip(ps, ms, strict=True))]
    pairs += [("peak", predicted.peak, measured.peak), ("makespan", predicted.makespan, measured.makespan)]
    return [(what, p, m) for what, p, m in pairs if abs(p - m) > tolerance(m)]


def test_the_conveyor_model_predicts_a_real_workers_every_start_and_end(
    deployment: tuple[conveyor.Conveyor, ConveyorModel],
) -> None:
    cv, model = deployment
    predictions = {
        cap: simulate(model, MESSAGES, HOLD, cap, max_batch_size=BATCH_SIZE, max_batch_timeout=BATCH_TIMEOUT)
        for cap in CAPS
    }
    assert predictions[None].peak == MESSAGES and predictions[5].peak == 5
    assert 0.5 < predictions[None].makespan < 0.6 and 4.0 < predictions[5].makespan < 4.2

    for cap in CAPS:
        measured = run_for_real(cv, f"ramp-{cap or 'auto'}", cap)
        off = compare(predictions[cap], measured)
        assert not off, f"max_concurrency={cap}: (what, predicted, measured) off by more than max(10 %, 100 ms): {off}"
