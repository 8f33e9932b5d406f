"""The concurrency ramp, at 1/30 of Cloudflare's scale: messages whose handler sleeps 2 s.

Cloudflare measured nine 60 s messages taking 257 s to drain while its consumer ramped up. Conveyor
scales to the backlog at once, so N messages of one per batch should take about one handler's time
when concurrency is automatic, and ceil(N / max_concurrency) handler times when it is capped. Each
run pre-loads the queue, then times ``app.start()`` until every message is acked; the comparison is
that ideal time, so the ratio is ideal / measured (1.0 is perfect).

Two more lines per run put the simulator (``conveyor.sim``) beside it: the ``conveyor`` model's
prediction ÷ the measured time (it leaves out the worker's start-up, which the measurement includes),
and Cloudflare's fitted ramp at the same 1/30 scale ÷ the measured time.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import conveyor
from conveyor.sim import CloudflareModel, simulate
from harness import arguments, body, emit, quiet_logs, ratio, scratch_directory, wait_until_handled

HANDLER_SECONDS = 2.0
# Cloudflare's measured ramp at the benchmark's scale (its 60 s handlers are 30 times ours).
SCALE = HANDLER_SECONDS / 60.0
CLOUDFLARE_AT_SCALE = CloudflareModel(first_start=2.0 * SCALE, ramp_step=12.0 * SCALE)


def drain_time(directory: Path, count: int, max_concurrency: int | None, limit: float | None) -> None:
    name = f"ramp-{count}-{max_concurrency or 'auto'}"
    cv = conveyor.connect(f"sqlite://{directory}")
    q = cv.create_queue(name)
    q.send_batch([{"body": body(i)} for i in range(count)])
    app = conveyor.App(cv)

    @app.consumer(name, max_batch_size=1, max_batch_timeout=0, max_concurrency=max_concurrency)
    def handle(batch: conveyor.MessageBatch) -> None:
        time.sleep(HANDLER_SECONDS)

    started = time.perf_counter()
    app.start()
    wait_until_handled(app, name, count, timeout=60)
    seconds = time.perf_counter() - started
    peak = app.dispatchers[name].scaler.peak
    app.stop()
    cv.close()
    ideal = HANDLER_SECONDS * math.ceil(count / (max_concurrency or count))
    label = f"ramp_{count}_messages_concurrency_{max_concurrency or 'auto'}"
    params = {"handler_seconds": HANDLER_SECONDS, "max_concurrency": max_concurrency, "peak_concurrency": peak}
    rounds = round(seconds / HANDLER_SECONDS, 2)
    if limit is None:
        emit(f"{label}_seconds", seconds, "s", count, rounds=rounds, **params)
    else:
        emit(f"{label}_seconds", seconds, "s", count, rounds=rounds, limit=limit, met=seconds <= limit, **params)
    ratio(f"{label}_vs_ideal", ideal, seconds, count, **params)
    consumer = {"max_batch_size": 1, "max_batch_timeout": 0.0}
    predicted = simulate("conveyor", count, HANDLER_SECONDS, max_concurrency, **consumer).makespan
    ratio(f"{label}_model_vs_measured", predicted, seconds, count, predicted=round(predicted, 4), **params)
    cloudflare = simulate(CLOUDFLARE_AT_SCALE, count, HANDLER_SECONDS, max_concurrency, **consumer).makespan
    ratio(f"{label}_cloudflare_ramp_vs_measured", cloudflare, seconds, count, cloudflare=round(cloudflare, 4), **params)


def main() -> None:
    args = arguments(__doc__ or "")
    quiet_logs()
    with scratch_directory("ramp") as directory:
        drain_time(directory, 9, None, limit=2.6)
        drain_time(directory, 40, None, limit=2.8)
        if not args.quick:
            drain_time(directory, 9, 5, limit=None)


if __name__ == "__main__":
    main()
