"""A worker SIGKILLed mid-round, as a real process (``conveyor worker``): its jobs end abandoned
(found by the next worker's sweeper once their lease ran out), its messages come back to the next
worker without running a check again, and the next round claims and checks every target: none
lost, none checked twice by one job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import conveyor
from conveyor.prober.store import probe_store
from tests.engine.postgres.support import fresh_client
from tests.prober.conftest import Servers
from tests.prober.worker_app import FLEET, LEASE_SECONDS
from tests.waiting import wait_for

CONVEYOR = Path(sys.executable).with_name("conveyor")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite://{tmp_path / 'data'}"
        return
    made = fresh_client()  # a schema of its own, dropped when the tests end
    yield made.deployment.location
    made.close()


def _worker(url: str, logs: Path) -> subprocess.Popen[bytes]:
    with (logs / "worker.log").open("ab") as out:
        return subprocess.Popen(
            [str(CONVEYOR), "--url", url, "worker", "tests.prober.worker_app:app"],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def test_a_worker_killed_mid_round_leaves_abandoned_jobs_and_the_next_round_checks_every_target(
    url: str, tmp_path: Path, servers: Servers
) -> None:
    targets = [servers(70 + i, delay=1.5) for i in range(6)]
    cv = conveyor.connect(url)
    fleet = conveyor.prober.fleet(cv, FLEET)
    fleet.import_targets([{"address": s.url, "interval": "1h"} for s in targets])
    store, account = probe_store(cv), cv.deployment.account
    first = _worker(url, tmp_path)
    try:
        wait_for(lambda: (info := fleet.info()) and info.registered_ms, timeout=30, what="the worker started")
        killed_round = fleet.round_now()
        wait_for(lambda: all(s.in_flight for s in targets), timeout=30, what="every check in flight")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
    second = _worker(url, tmp_path)
    try:
        summary = wait_for(
            lambda: (r := fleet.round(killed_round)) and r.done and r,
            timeout=LEASE_SECONDS + 20,
            what="the sweeper abandoned the killed worker's jobs",
        )
        assert summary.states == {"abandoned": 6}
        next_round = fleet.round_now(wait=True, timeout=30)
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=30) == 0
    checked = fleet.round(next_round)
    assert checked is not None and checked.states == {"finished": 6} and checked.failed == 0
    assert [s.requests for s in targets] == [2] * 6, "one check by the killed worker, one after: none run twice"
    jobs, _, _ = store.history(account, FLEET, 0)
    assert all(job.started_ms is not None for job in jobs), "every job ran once; none was started again"
    report = fleet.report(since_ms=0)
    assert (report.jobs, report.runs, report.finished, report.abandoned, report.abandoned_started) == (12, 12, 6, 6, 6)
    assert report.accounted and report.host_overlaps == 0 and report.open == 0
    cv.close()
