"""Rounds end to end: real HTTP(S) servers on distinct loopback hosts, some slow, one failing, one
with an expired certificate; the prober's worker in this process; each round's outcome read back
from the tool's tables."""

from __future__ import annotations

import datetime
import itertools
from typing import Any

import pytest

import conveyor
from conveyor.prober import CheckFailed, NoProberWorker, ProbeTarget, UnknownCheck
from conveyor.prober.model import Job
from conveyor.prober.store import probe_store
from conveyor.workflows.client import workflow_store
from conveyor.workflows.schedules import CronService
from tests.conformance.support import FakeClock
from tests.prober.conftest import Servers, worker
from tests.prober.target_servers import CertificateAuthority
from tests.waiting import wait_for


def _prober(cv: conveyor.Conveyor, ca: CertificateAuthority, **settings: Any) -> conveyor.Prober:
    options: dict[str, Any] = {"fleet": "web", "schedule": None, "timeout": 1.0, "verify": str(ca.ca_file)}
    return conveyor.Prober(conveyor.App(cv, grace_period=5), **{**options, **settings})


def _jobs(prober: conveyor.Prober) -> dict[str, Job]:
    """The fleet's jobs by address (each test's targets are checked once)."""
    jobs, _, _ = probe_store(prober.conveyor).history(prober.conveyor.deployment.account, prober.name, 0)
    return {job.address: job for job in jobs}


def _most_at_once(jobs: list[Job]) -> int:
    """The most checks that ran at the same time (from their start and end times)."""
    edges = sorted(
        itertools.chain.from_iterable(((j.started_ms, 1), (j.ended_ms, -1)) for j in jobs),
        key=lambda edge: (edge[0], edge[1]),
    )
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


def test_a_fan_out_round_checks_each_due_target_once_and_records_why_one_failed(
    cv: conveyor.Conveyor, ca: CertificateAuthority, servers: Servers
) -> None:
    ok = [servers(2 + i, delay=0.1) for i in range(5)]
    failing = servers(10, status=503)
    valid_tls = servers(11, tls=ca.leaf("127.0.0.11"))
    expired_tls = servers(12, tls=ca.leaf("127.0.0.12", expired=True))
    slow = servers(13, delay=3.0)
    every = [*ok, failing, valid_tls, expired_tls, slow]
    prober = _prober(cv, ca, messages=4, per_message=3, at_a_time=2)
    assert prober.fleet.import_targets([{"address": s.url} for s in every]) == (len(every), 0)
    with worker(prober):
        summary = prober.round(timeout=30)
    assert summary.jobs == len(every) and summary.states == {"finished": len(every)} and summary.failed == 3
    assert summary.messages == 4 and summary.trigger == "round" and summary.seconds is not None
    assert [s.requests for s in every if s is not expired_tls] == [1] * (len(every) - 1), "each checked once"
    assert expired_tls.requests == 0, "the handshake with the expired certificate was refused"
    jobs = _jobs(prober)
    assert all(jobs[s.url].ok for s in [*ok, valid_tls])
    assert jobs[failing.url].error == "HTTP 503"
    assert jobs[expired_tls.url].error == "TLS certificate has expired"
    assert jobs[slow.url].error == "no answer within 1 s"
    assert '"cert_days_left":' in (jobs[valid_tls.url].detail or "")
    assert '"status":200' in (jobs[ok[0].url].detail or "")
    listed = {t.address: t for t in prober.fleet.targets()}
    assert listed[failing.url].last_ok is False and listed[failing.url].last_error == "HTTP 503"
    assert listed[ok[0].url].due_ms == summary.mark_ms + 12 * 3600_000, "next due: the round's mark + 12 h"


def test_each_invocation_checks_at_most_at_a_time_targets_at_once(
    cv: conveyor.Conveyor, ca: CertificateAuthority, servers: Servers
) -> None:
    targets = [servers(20 + i, delay=0.3) for i in range(6)]
    prober = _prober(cv, ca, messages=1, per_message=6, at_a_time=2)
    prober.fleet.import_targets([{"address": s.url} for s in targets])
    with worker(prober):
        summary = prober.round(timeout=30)
    assert summary.jobs == 6 and summary.failed == 0
    assert _most_at_once(list(_jobs(prober).values())) == 2
    assert summary.seconds is not None and summary.seconds >= 0.9, "three waves of two"


def test_the_single_loop_checks_one_target_after_another(
    cv: conveyor.Conveyor, ca: CertificateAuthority, servers: Servers
) -> None:
    targets = [servers(30 + i, delay=0.2) for i in range(4)]
    prober = _prober(cv, ca, messages=0)
    prober.fleet.import_targets([{"address": s.url} for s in targets])
    summary = prober.round(timeout=30)  # no worker: the loop runs in the caller
    assert summary.jobs == 4 and summary.states == {"finished": 4} and summary.messages == 0
    assert _most_at_once(list(_jobs(prober).values())) == 1
    assert summary.seconds is not None and summary.seconds >= 0.8


def test_a_host_is_checked_by_one_job_at_a_time(
    cv: conveyor.Conveyor, ca: CertificateAuthority, servers: Servers
) -> None:
    one_host = servers(40, delay=0.1)
    prober = _prober(cv, ca, messages=5, per_message=2)
    paths = [one_host.url + f"?n={n}" for n in range(3)]
    prober.fleet.import_targets([{"address": path} for path in paths])
    with worker(prober):
        rounds = [prober.round(timeout=30) for _ in range(3)]
    assert [r.jobs for r in rounds] == [1, 1, 1], "one target of the host per round"
    assert sorted(job.address for job in _jobs(prober).values()) == sorted(paths)
    assert one_host.in_flight_peak == 1


def test_checks_registered_in_the_workers_code_run_by_name_and_report_their_outcome(
    cv: conveyor.Conveyor, ca: CertificateAuthority
) -> None:
    prober = _prober(cv, ca, messages=2, per_message=2)

    @prober.check("signing")
    def signing(target: ProbeTarget) -> dict[str, Any]:
        if "unsigned" in target.address:
            raise CheckFailed("no signature", {"host": target.host})
        return {"signed": True}

    @prober.check("async-ping")
    async def ping(target: ProbeTarget) -> None:
        raise ValueError(f"{target.host} did not answer")

    added = prober.fleet.import_targets(
        [
            {"address": "mcp-a.internal:443", "check": "signing"},
            {"address": "mcp-b.internal:443/unsigned", "check": "signing"},
            {"address": "mcp-c.internal", "check": "async-ping"},
        ]
    )
    assert added == (3, 0)
    with worker(prober):
        summary = prober.round(timeout=30)
    assert summary.jobs == 3 and summary.failed == 2
    jobs = _jobs(prober)
    assert jobs["mcp-a.internal:443"].ok and jobs["mcp-a.internal:443"].detail == '{"signed":true}'
    assert jobs["mcp-b.internal:443/unsigned"].error == "no signature"
    assert jobs["mcp-b.internal:443/unsigned"].detail == '{"host":"mcp-b.internal"}'
    assert jobs["mcp-c.internal"].error == "ValueError: mcp-c.internal did not answer"


def test_a_check_name_no_worker_registered_is_refused_and_one_this_worker_lacks_is_reported(
    cv: conveyor.Conveyor, ca: CertificateAuthority
) -> None:
    fleet = conveyor.prober.fleet(cv, "web")
    with pytest.raises(UnknownCheck, match=r"check 'os\.system' is not registered for this fleet \(known: http\)"):
        fleet.add("mcp.internal", check="os.system")
    assert fleet.targets() == []
    registering = _prober(cv, ca)
    registering.check("signing")(lambda target: None)
    with worker(registering):
        pass  # a worker that registers "signing" for the fleet, then stops
    assert fleet.known_checks() == ["http", "signing"]
    assert fleet.add("mcp.internal", check="signing")
    lacking = _prober(cv, ca, messages=1)
    with worker(lacking):
        summary = lacking.round(timeout=30)
    assert summary.failed == 1
    assert _jobs(lacking)["mcp.internal"].error == (
        "no check named 'signing' is registered in this worker (it has http)"
    )


def test_round_now_asks_the_fleets_worker_for_a_round_through_its_tick_workflow(
    cv: conveyor.Conveyor, ca: CertificateAuthority, servers: Servers
) -> None:
    fleet = conveyor.prober.fleet(cv, "web")
    with pytest.raises(NoProberWorker, match="fleet 'web' has no worker yet"):
        fleet.round_now()
    target = servers(50)
    prober = _prober(cv, ca, messages=2)
    fleet.add(target.url)
    with worker(prober):
        round_id = fleet.round_now(wait=True, timeout=30)
    summary = fleet.round(round_id)
    assert summary is not None and summary.trigger == "now" and summary.jobs == 1 and summary.done
    assert round_id.startswith("now-") and target.requests == 1
    assert cv.workflow("prober-web").get(round_id).status().status == "complete"


def test_a_cron_tick_starts_one_round_whose_mark_is_the_tick(
    cv: conveyor.Conveyor, ca: CertificateAuthority, servers: Servers
) -> None:
    start = datetime.datetime(2026, 12, 3, 16, 36, tzinfo=datetime.UTC)
    clock = FakeClock(round(start.timestamp() * 1000))
    cv.engine.clock = clock
    target = servers(60)
    prober = _prober(cv, ca, messages=2, schedule="*/5 * * * *")
    prober.fleet.add(target.url)
    raw = cv.engine.deployment_engine()
    assert raw is not None
    with worker(prober):
        clock.advance(4 * 60)  # 16:40
        ticks = [CronService(lambda: workflow_store(cv), raw)() for _ in range(3)]
        summary = wait_for(lambda: (r := prober.fleet.round("cron-20261203T1640Z")) and r.done and r, what="the round")
    assert sum(ticks) <= 1, "a tick starts one round however many coordinators run it"
    assert summary.trigger == "cron" and summary.jobs == 1
    assert summary.mark_ms == round(datetime.datetime(2026, 12, 3, 16, 40, tzinfo=datetime.UTC).timestamp() * 1000)
    assert target.requests == 1
