"""A fleet behind ``conveyor serve``: a remote client's targets pass the operator's egress policy,
its rounds are run by the account's worker, its report and rounds are read over HTTP; one account
never sees another's fleets, and a read-only token adds nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import conveyor
from conveyor.egress import ENVIRONMENT_VARIABLE, EgressRefused
from conveyor.errors import Forbidden
from conveyor.prober import NoProberWorker, TargetNotFound, UnknownCheck
from conveyor.server.testing import RunningServer, running_server
from tests.prober.conftest import Servers, worker

ACCOUNT = "acc1"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[RunningServer, str]]:
    url = f"sqlite://{tmp_path / 'data'}"
    with running_server(url) as server:
        yield server, url


def _remote(server: RunningServer, account: str = ACCOUNT, *, read_only: bool = False) -> conveyor.Conveyor:
    secret, _ = server.tokens.create(account, read_only=read_only)
    return conveyor.connect(server.url, token=secret, account_id=account)


def test_a_remote_client_manages_targets_through_the_egress_policy_and_gets_rounds_run_by_the_worker(
    served: tuple[RunningServer, str], servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, url = served
    target = servers(100, delay=0.1)
    with _remote(server) as cv:
        fleet = conveyor.prober.fleet(cv, "web")
        monkeypatch.delenv(ENVIRONMENT_VARIABLE, raising=False)
        with pytest.raises(EgressRefused, match="loopback range; the operator may allow it"):
            fleet.add(target.url)
        with pytest.raises(UnknownCheck):
            fleet.add("mcp.internal", check="signing")
        assert fleet.targets() == []
        monkeypatch.setenv(ENVIRONMENT_VARIABLE, "127.0.0.100")
        assert fleet.import_targets([{"address": target.url, "interval": "1h"}]) == (1, 0)
        [listed] = fleet.targets()
        assert (listed.address, listed.host, listed.interval_ms) == (target.url, "127.0.0.100", 3_600_000)
        with pytest.raises(NoProberWorker, match="fleet 'web' has no worker yet"):
            fleet.round_now()
        with conveyor.connect(url, account_id=ACCOUNT) as worker_side:
            prober = conveyor.Prober(conveyor.App(worker_side, grace_period=5), fleet="web", schedule=None)
            with worker(prober):
                round_id = fleet.round_now(wait=True, timeout=30)
        summary = fleet.round(round_id)
        assert summary is not None and summary.done and summary.states == {"finished": 1} and summary.trigger == "now"
        assert fleet.round("now-0-none") is None
        report = fleet.report(since_ms=0)
        assert (report.jobs, report.finished, report.accounted, report.host_overlaps) == (1, 1, True, 0)
        assert [row.fleet for row in conveyor.prober.list_fleets(cv)] == ["web"]
        assert fleet.known_checks() == ["http"]
        assert fleet.remove(target.url) == [f"{target.url} (http)"]
        with pytest.raises(TargetNotFound):
            fleet.remove(target.url)
    assert target.requests == 1


def test_fleets_belong_to_their_account_and_a_read_only_token_changes_nothing(
    served: tuple[RunningServer, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _ = served
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "127.0.0.0/8")
    with _remote(server) as owner, _remote(server, "acc2") as other, _remote(server, read_only=True) as reader:
        assert conveyor.prober.fleet(owner, "web").add("http://127.0.0.1:9/health")
        assert conveyor.prober.fleet(other, "web").targets() == []
        assert conveyor.prober.list_fleets(other) == []
        assert [t.address for t in conveyor.prober.fleet(reader, "web").targets()] == ["http://127.0.0.1:9/health"]
        with pytest.raises(Forbidden):
            conveyor.prober.fleet(reader, "web").add("http://127.0.0.1:9/other")
        with pytest.raises(Forbidden):
            conveyor.prober.fleet(reader, "web").remove("http://127.0.0.1:9/health")
        assert len(conveyor.prober.fleet(owner, "web").targets()) == 1
