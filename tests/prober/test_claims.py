"""Claims under a race: 50 claimers at once over 200 targets on 40 hosts, on SQLite (each claimer
its own connection to prober.db) and PostgreSQL (concurrent transactions at READ COMMITTED). The
job table afterwards: no target checked twice, no target and no host with two jobs in flight."""

from __future__ import annotations

import collections
import itertools
import random
import threading
import time
import uuid
from collections.abc import Callable

import conveyor
from conveyor.engine.tables import PostgresTables
from conveyor.prober.model import CheckOutcome, Job, Shape
from conveyor.prober.store import QUERIES, ProbeStore, open_probe_tables, probe_store

CLAIMERS = 50
TARGETS = 200
HOSTS = 40
LEASE_MS = 60_000


def _fleet(cv: conveyor.Conveyor, interval: float) -> None:
    fleet = conveyor.prober.fleet(cv, "race")
    added, _ = fleet.import_targets(
        [{"address": f"http://10.0.{i % HOSTS}.1:8080/t{i}", "interval": interval} for i in range(TARGETS)]
    )
    assert added == TARGETS


def _stores(cv: conveyor.Conveyor) -> list[ProbeStore]:
    """Ten stores the claimers share: on SQLite, ten connections to prober.db (as ten processes
    would have); on PostgreSQL, ten pools of five connections."""
    if cv.deployment.kind == "sqlite":
        return [ProbeStore(open_probe_tables(cv.deployment)) for _ in range(10)]
    return [ProbeStore(PostgresTables(cv.deployment.location, QUERIES, pool_size=5)) for _ in range(10)]


def _race(cv: conveyor.Conveyor, rounds: int, shape: Shape, until_none_due: bool = False) -> None:
    """Every claimer claims ``rounds`` rounds (``until_none_due``: then on, until no target is
    due), running each job of its round (start, a moment's check, finish) before the next, all of
    them released at once."""
    stores = _stores(cv)
    clock: Callable[[], int] = cv.engine.clock.now_ms
    account = cv.deployment.account
    start = threading.Barrier(CLAIMERS)
    errors: list[BaseException] = []

    def claimer(n: int) -> None:
        store = stores[n % len(stores)]
        rng = random.Random(n)
        try:
            start.wait()
            for r in itertools.count():
                if r >= rounds and not (until_none_due and _any_due(store, account, clock())):
                    return
                claimed = store.claim(account, "race", f"c{n}-r{r}", "round", clock(), shape, LEASE_MS, clock)
                if not claimed.job_ids:
                    time.sleep(rng.uniform(0, 0.01))  # lost every race: let the others finish theirs
                for job_id in claimed.job_ids:
                    runner = uuid.uuid4().hex
                    job = store.start(job_id, runner, LEASE_MS, clock())
                    assert job is not None, "a job claimed by this claimer is started by it"
                    time.sleep(rng.uniform(0, 0.002))
                    assert store.finish(job, runner, CheckOutcome(True, 1), clock())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(CLAIMERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in stores:
        store.close()
    assert not errors, errors[0]


def _any_due(store: ProbeStore, account: str, now: int) -> bool:
    return any(target.due_ms <= now for target in store.targets(account, "race"))


def _jobs(cv: conveyor.Conveyor) -> list[Job]:
    jobs, _, _ = probe_store(cv).history(cv.deployment.account, "race", 0)
    return jobs


def _overlapping(jobs: list[Job], key: Callable[[Job], str]) -> list[str]:
    """The keys (targets or hosts) with two jobs whose spans, claim to end, overlap."""
    spans: dict[str, list[tuple[int, int]]] = collections.defaultdict(list)
    for job in jobs:
        assert job.ended_ms is not None, f"job {job.id} never ended"
        spans[key(job)].append((job.claimed_ms, job.ended_ms))
    found = []
    for name, held in spans.items():
        held.sort()
        if any(later[0] < earlier[1] for earlier, later in itertools.pairwise(held)):
            found.append(name)
    return found


def test_racing_claimers_check_every_due_target_exactly_once(cv: conveyor.Conveyor) -> None:
    _fleet(cv, interval=3600)
    _race(cv, rounds=4, shape=Shape(2, 5, 1), until_none_due=True)
    jobs = _jobs(cv)
    per_target = collections.Counter(job.target_id for job in jobs)
    assert len(per_target) == TARGETS, "every target was claimed"
    twice = [target for target, n in per_target.items() if n > 1]
    assert not twice, f"{len(twice)} targets checked twice, e.g. {twice[:3]}"
    assert {job.state for job in jobs} == {"finished"}
    assert _overlapping(jobs, lambda j: j.host) == []


def test_racing_claimers_over_many_rounds_never_overlap_a_target_or_a_host(cv: conveyor.Conveyor) -> None:
    _fleet(cv, interval=0)
    _race(cv, rounds=8, shape=Shape(1, 5, 1))
    jobs = _jobs(cv)
    assert len(jobs) > 2 * HOSTS, "targets due again at once were claimed again and again"
    assert {job.state for job in jobs} == {"finished"}
    assert _overlapping(jobs, lambda j: j.target_id) == [], "a target had two jobs in flight"
    assert _overlapping(jobs, lambda j: j.host) == [], "a host had two jobs in flight"
    report = conveyor.prober.fleet(cv, "race").report(since_ms=0)
    assert report.host_overlaps == 0 and report.accounted and report.jobs == report.runs == report.finished
