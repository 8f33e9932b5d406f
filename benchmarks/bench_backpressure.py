"""What back-pressure costs a send that it lets through: embedded ``send_batch`` (100 × 1 KB) and
single ``send`` with every limit set (``QueueLimits`` far above the load, so nothing is refused)
against the same sends with none, in alternating rounds of the same run; target ≥ 0.95 ×.

The gate's work per send is a token bucket under a lock and a comparison with figures the previous
send returned; the backlog figures are read from the engine at most once a second.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import conveyor
from harness import arguments, body, emit, ratio, scratch_directory

HIGH = conveyor.QueueLimits(max_send_rate=1e9, max_backlog=10**12, max_queue_bytes=10**15)


def _rate(queue: conveyor.Queue, batches: int, size: int) -> float:
    """Messages a second of ``batches`` sends of ``size`` messages (``send`` when ``size`` is 1)."""
    payload = [{"body": body(i)} for i in range(size)]
    started = time.perf_counter()
    for _ in range(batches):
        if size == 1:
            queue.send(payload[0]["body"])
        else:
            queue.send_batch(payload)
    return batches * size / (time.perf_counter() - started)


def limited_vs_unlimited(directory: Path, rounds: int, batches: int, size: int) -> None:
    with (
        conveyor.connect(f"sqlite://{directory / 'free'}") as free,
        conveyor.connect(f"sqlite://{directory / 'limited'}", queue_limits=HIGH) as limited,
    ):
        queues = {"free": free.create_queue("q"), "limited": limited.create_queue("q")}
        figures: dict[str, list[float]] = {"free": [], "limited": []}
        for r in range(rounds):
            for name in ("free", "limited") if r % 2 == 0 else ("limited", "free"):
                figures[name].append(_rate(queues[name], batches, size))
                queues[name].purge()
    what = "send_batch" if size > 1 else "send"
    n = rounds * batches * size
    free_rate, limited_rate = statistics.median(figures["free"]), statistics.median(figures["limited"])
    emit(f"{what} without limits", free_rate, "msg/s", n, batch=size)
    emit(f"{what} with every limit set (none reached)", limited_rate, "msg/s", n, batch=size)
    ratio(f"{what} with limits ÷ without", limited_rate, free_rate, n, target=0.95, batch=size)


def main() -> None:
    quick = arguments(__doc__ or "").quick
    rounds = 4 if quick else 10
    with scratch_directory("backpressure") as directory:
        limited_vs_unlimited(directory / "batch", rounds, batches=10 if quick else 40, size=100)
        limited_vs_unlimited(directory / "single", rounds, batches=50 if quick else 400, size=1)


if __name__ == "__main__":
    main()
