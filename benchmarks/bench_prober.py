"""The prober's round time: 21 targets whose check takes 0.55 s (real HTTP servers on 21 loopback
hosts, each answering after 0.55 s: a tenth of the seed's ~5.5 s), checked by the old single loop
(``messages=0``: one after another) and by the fan-out round of the seed's shape, 19 messages × 5
targets × 3 at a time, with the consumer's concurrency automatic. Rounds are triggered one after
another (``prober.round()``, the targets' interval 0, so each round checks all 21), the worker in
this process. Prints each shape's median and slowest round (first job's claim to last finished
check), the measured round times for the planner's comparison, and single loop / fan-out (held
against 8; Cloudflare's platform gave 5: 116 s → 23 s).

    python benchmarks/bench_prober.py [--quick] [--url postgresql://...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import conveyor  # noqa: E402
from conveyor.prober.report import RoundSummary  # noqa: E402
from conveyor.prober.store import probe_store  # noqa: E402
from harness import emit, quiet_logs, ratio, scratch_directory  # noqa: E402
from tests.prober.target_servers import TargetServer  # noqa: E402

TARGETS = 21
CHECK_SECONDS = 0.55
SHAPE = {"messages": 19, "per_message": 5, "at_a_time": 3}


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 5 fan-out rounds, 1 single-loop round")
    parser.add_argument("--url", help="the deployment (default: SQLite in a scratch directory)")
    return parser.parse_args()


def _first_starts(cv: conveyor.Conveyor, fleet: str, summary: RoundSummary) -> tuple[float, float]:
    """Seconds from the round's claim to its first and to its last check's start."""
    found = probe_store(cv).round(cv.deployment.account, fleet, summary.id)
    assert found is not None
    starts = [job.started_ms - summary.claimed_ms for job in found[1] if job.started_ms is not None]
    return min(starts) / 1000, max(starts) / 1000


def _rounds(cv: conveyor.Conveyor, fleet: str, count: int, **shape: Any) -> tuple[list[RoundSummary], int]:
    """``count`` rounds after one warm-up round (the consumer's first start); their summaries and
    the fan-out consumer's peak concurrency (0 for the single loop, which runs in this thread)."""
    app = conveyor.App(cv, grace_period=5)
    prober = conveyor.Prober(app, fleet=fleet, schedule=None, timeout=10, **shape)
    app.start()
    try:
        prober.round(timeout=120)
        summaries = [prober.round(timeout=120) for _ in range(count)]
    finally:
        app.stop()
    peak = app.dispatchers[f"prober-{fleet}"].scaler.peak
    for summary in summaries:
        assert summary.jobs == TARGETS and summary.failed == 0, summary
    return summaries, peak


def _emit_shape(
    name: str, cv: conveyor.Conveyor, fleet: str, summaries: list[RoundSummary], peak: int, **shape: Any
) -> float:
    seconds = [s.seconds for s in summaries if s.seconds is not None]
    starts = [_first_starts(cv, fleet, s) for s in summaries]
    median = float(statistics.median(seconds))
    params = {**shape, "targets": TARGETS, "check_seconds": CHECK_SECONDS, "peak_concurrency": peak}
    emit(f"prober {name} round median", median, "s", len(seconds), **params)
    emit(f"prober {name} round slowest", max(seconds), "s", len(seconds), **params)
    emit(
        f"prober {name} round times",
        median,
        "s",
        len(seconds),
        **params,
        rounds=[round(s, 3) for s in seconds],
        first_check_started=[round(a, 3) for a, _ in starts],
        last_check_started=[round(b, 3) for _, b in starts],
    )
    return median


def main() -> None:
    args = _arguments()
    quiet_logs()
    servers = [TargetServer(f"127.0.0.{2 + i}", delay=CHECK_SECONDS) for i in range(TARGETS)]
    try:
        with scratch_directory("prober") as scratch, conveyor.connect(args.url or f"sqlite://{scratch}/data") as cv:
            targets = [{"address": s.url, "interval": 0} for s in servers]
            for fleet in ("loop", "fanout"):
                conveyor.prober.fleet(cv, fleet).import_targets(targets)
            fanout, peak = _rounds(cv, "fanout", 5 if args.quick else 20, **SHAPE)
            fanout_median = _emit_shape("fan-out 19x5x3", cv, "fanout", fanout, peak, **SHAPE)
            loop, _ = _rounds(cv, "loop", 1 if args.quick else 3, messages=0)
            loop_median = _emit_shape("single loop", cv, "loop", loop, 0, messages=0)
            ratio("prober single loop / fan-out round", loop_median, fanout_median, len(fanout), target=8.0)
            engine, met = cv.deployment.kind, fanout_median <= 1.3
            emit("prober fan-out round median", fanout_median, "s", len(fanout), target=1.3, met=met, engine=engine)
    finally:
        for server in servers:
            server.stop()


if __name__ == "__main__":
    main()
