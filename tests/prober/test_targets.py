"""A fleet's targets (add, list, import, remove; every bad one refused by name, changing nothing;
the egress policy for targets given through the server), job leases and the sweeper, and the
report's figures."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest

import conveyor
from conveyor.egress import EgressPolicy, EgressRefused
from conveyor.prober import InvalidTarget, ProbeTarget, TargetNotFound, UnknownCheck
from conveyor.prober.model import CheckOutcome, Shape
from conveyor.prober.store import probe_store
from tests.conformance.support import FakeClock

DAY_START = datetime.datetime(2026, 12, 3, 0, 0, tzinfo=datetime.UTC)


@pytest.fixture
def clock(cv: conveyor.Conveyor) -> FakeClock:
    fake = FakeClock(round((DAY_START + datetime.timedelta(hours=9)).timestamp() * 1000))
    cv.engine.clock = fake
    return fake


def test_targets_are_added_listed_and_removed_by_id_or_address(cv: conveyor.Conveyor) -> None:
    fleet = conveyor.prober.fleet(cv, "web")
    assert fleet.add("https://MCP.example.com:8443/health")
    assert not fleet.add("https://MCP.example.com:8443/health"), "listed already: left as it is"
    assert fleet.import_targets(
        [
            {"address": "https://a.example.com/", "interval": "30m"},
            {"address": "http://b.example.com/", "host": "lb.example.com", "interval": 90},
        ]
    ) == (2, 0)
    listed = {t.address: t for t in fleet.targets()}
    assert sorted(listed) == ["http://b.example.com/", "https://MCP.example.com:8443/health", "https://a.example.com/"]
    mcp = listed["https://MCP.example.com:8443/health"]
    assert (mcp.host, mcp.check, mcp.interval_ms, mcp.last_state) == ("mcp.example.com", "http", 12 * 3600_000, None)
    assert listed["https://a.example.com/"].interval_ms == 30 * 60_000
    behind = listed["http://b.example.com/"]
    assert (behind.host, behind.interval_ms) == ("lb.example.com", 90_000)
    assert fleet.remove(mcp.id) == ["https://MCP.example.com:8443/health (http)"]
    assert fleet.remove("https://a.example.com/") == ["https://a.example.com/ (http)"]
    with pytest.raises(TargetNotFound, match=r"fleet 'web' has no target with id or address 'https://a\.") as refused:
        fleet.remove("https://a.example.com/")
    assert refused.value.code == 17002
    assert [t.address for t in fleet.targets()] == ["http://b.example.com/"]
    assert [t.address for t in conveyor.prober.fleet(cv, "other").targets()] == [], "fleets are apart"


@pytest.mark.parametrize(
    ("item", "problem"),
    [
        ({"address": "ftp://files.example.com/"}, "an http check's address is an http:// or https:// URL"),
        ({"address": "mcp.example.com"}, "an http check's address is an http:// or https:// URL"),
        ({"address": ""}, "must be a string of 1 to 2048 characters"),
        ({"address": "https://a.example.com/ x"}, "contains whitespace or control characters"),
        ({"address": "https://a.example.com:http/"}, "is not a valid URL or host"),
        ({"address": "https://a.example.com/", "interval": "soon"}, "interval is 'soon'; give seconds, '12h'"),
        ({"address": "https://a.example.com/", "interval": "400d"}, "the limit is 365 days"),
        ({"address": "https://a.example.com/", "interval": -5}, "it must be a finite number of seconds >= 0"),
        ({"address": "https://a.example.com/", "colour": "red"}, "unknown target field(s) 'colour'"),
        ({"address": "https://a.example.com/", "check": "Bad Name"}, "invalid check name 'Bad Name'"),
        ({"address": "https://a.example.com/", "host": "a b"}, "target host 'a b' is not a host name"),
        ({"check": "http"}, "a target needs an address"),
    ],
)
def test_a_bad_target_is_refused_by_name_and_an_import_with_one_adds_none(
    cv: conveyor.Conveyor, item: dict[str, Any], problem: str
) -> None:
    fleet = conveyor.prober.fleet(cv, "web")
    good = [{"address": "https://ok-1.example.com/"}, {"address": "https://ok-2.example.com/"}]
    with pytest.raises(InvalidTarget) as refused:
        fleet.import_targets([*good, item])
    assert refused.value.message.startswith("target 3: ") and problem in refused.value.message
    assert refused.value.code == 17001
    assert fleet.targets() == []


def test_a_fleet_name_or_shape_out_of_range_is_refused(cv: conveyor.Conveyor) -> None:
    with pytest.raises(InvalidTarget, match="invalid fleet name 'Web Fleet'"):
        conveyor.prober.fleet(cv, "Web Fleet")
    with pytest.raises(InvalidTarget, match="per_message is 0; it must be a whole number from 1 to 100"):
        conveyor.Prober(cv, fleet="web", per_message=0)
    with pytest.raises(
        InvalidTarget, match=r"timeout is 400; it must be more than 0, and a message's 2 wave\(s\) of checks"
    ):
        conveyor.Prober(cv, fleet="web", timeout=400)
    with pytest.raises(conveyor.workflows.errors.InvalidStepConfig, match="schedule 'hourly' has 1 fields"):
        conveyor.Prober(cv, fleet="web", schedule="hourly")


def test_targets_given_through_the_server_pass_the_egress_policy(cv: conveyor.Conveyor) -> None:
    fleet = conveyor.prober.fleet(cv, "web")
    with pytest.raises(EgressRefused, match=r"resolves to 127\.0\.0\.1, which is in a loopback range"):
        fleet.add("http://127.0.0.1:8080/health", egress=EgressPolicy())
    with pytest.raises(UnknownCheck):
        fleet.add("10.1.2.3:22", check="ssh", egress=EgressPolicy())
    with_ssh = conveyor.prober.Fleet(cv, "web", checks=["ssh"])
    with pytest.raises(EgressRefused, match=r"10\.1\.2\.3, which is in a private range"):
        with_ssh.add("10.1.2.3:22", check="ssh", egress=EgressPolicy())
    assert fleet.targets() == []
    assert fleet.add("http://127.0.0.1:8080/health", egress=EgressPolicy.parse("127.0.0.1"))
    assert fleet.add("http://127.0.0.1:8080/health?embedded", egress=None), "embedded use is the operator's own"


def test_a_job_whose_lease_runs_out_is_abandoned_and_its_target_claimed_again(
    cv: conveyor.Conveyor, clock: FakeClock
) -> None:
    prober = conveyor.Prober(cv, fleet="web", schedule=None, lease=60, timeout=5)
    prober.fleet.import_targets([{"address": f"https://h{i}.example.com/", "interval": "1h"} for i in range(2)])
    store = probe_store(cv)
    account = cv.deployment.account
    first = store.claim(account, "web", "r1", "round", clock.now_ms(), Shape(1, 5, 1), 60_000, clock.now_ms)
    runner = uuid.uuid4().hex
    started = store.start(first.job_ids[0], runner, 60_000, clock.now_ms())
    assert started is not None
    clock.advance(59)
    assert prober.sweep() == 0, "within the lease"
    again = store.claim(account, "web", "r2", "round", clock.now_ms(), Shape(1, 5, 1), 60_000, clock.now_ms)
    assert again.job_ids == [], "a target with an open job is never claimed again"
    clock.advance(2)
    assert prober.sweep() == 2
    assert not store.finish(started, runner, CheckOutcome(True, 5), clock.now_ms()), "a late finish is refused"
    assert store.start(first.job_ids[1], uuid.uuid4().hex, 60_000, clock.now_ms()) is None
    third = store.claim(account, "web", "r3", "round", clock.now_ms(), Shape(1, 5, 1), 60_000, clock.now_ms)
    assert len(third.job_ids) == 2, "claimable again after the lease"
    report = prober.fleet.report()
    assert (report.jobs, report.abandoned, report.abandoned_started, report.open, report.overdue) == (4, 2, 1, 2, 0)
    assert report.accounted and report.runs == 1 and report.finished == 0


def test_a_claim_sweeps_the_fleet_first_and_a_removed_targets_claimed_job_is_cancelled(
    cv: conveyor.Conveyor, clock: FakeClock
) -> None:
    fleet = conveyor.prober.fleet(cv, "web")
    fleet.import_targets([{"address": f"https://h{i}.example.com/"} for i in range(2)])
    store = probe_store(cv)
    account = cv.deployment.account
    first = store.claim(account, "web", "r1", "round", clock.now_ms(), Shape(2, 1, 1), 10_000, clock.now_ms)
    assert len(first.slots) == 2 and [len(s) for s in first.slots] == [1, 1]
    assert fleet.remove("https://h0.example.com/")
    clock.advance(11)
    second = store.claim(account, "web", "r2", "round", clock.now_ms(), Shape(2, 1, 1), 10_000, clock.now_ms)
    assert len(second.job_ids) == 1, "the expired job was abandoned by the claim itself"
    assert store.claim(account, "web", "r2", "round", clock.now_ms(), Shape(2, 1, 1), 10_000, clock.now_ms) == second
    states = sorted(job.state for job in store.history(account, "web", 0)[0])
    assert states == ["abandoned", "cancelled", "claimed"]


def test_the_report_accounts_for_every_job_and_finds_close_checks_failures_and_daily_coverage(
    cv: conveyor.Conveyor, clock: FakeClock
) -> None:
    prober = conveyor.Prober(cv, fleet="web", messages=0, schedule=None)

    @prober.check("flaky")
    def flaky(target: ProbeTarget) -> None:
        clock.advance(2)
        if target.address.endswith("3"):
            raise ValueError("refused")

    prober.fleet.import_targets([{"address": f"node-{i}", "check": "flaky", "interval": 0} for i in range(4)])
    seconds = [prober.round().seconds for _ in range(2)]
    clock.advance(20 * 60)
    seconds.append(prober.round().seconds)
    assert seconds == [8.0, 8.0, 8.0], "the single loop: four checks of 2 s one after another"
    report = prober.fleet.report()
    assert (report.jobs, report.runs, report.finished, report.abandoned, report.cancelled) == (12, 12, 12, 0, 0)
    assert report.accounted and report.host_overlaps == 0
    assert report.close_targets == 4, "the second round came 8 s after the first"
    assert (report.rounds, report.round_median_seconds, report.round_slowest_seconds) == (3, 8.0, 8.0)
    assert report.mark_median_seconds == 8.0
    assert (report.passed, report.failed) == (9, 3)
    assert {(f.address, f.error) for f in report.recent_failures} == {("node-3", "ValueError: refused")}
    assert [(d.day, d.checked, d.listed) for d in report.days] == [("2026-12-02", 0, 0), ("2026-12-03", 4, 4)]
