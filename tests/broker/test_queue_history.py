"""The queue history: the coordinator's points per queue on SQLite and PostgreSQL, their rates, the
prune, and ``conveyor queues info --history``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import conveyor
from conveyor.broker.coordinator import Coordinator
from conveyor.client.history import queue_history
from conveyor.engine.history import (
    HistoryRecorder,
    HistorySettings,
    QueuePoint,
    history_rows,
    open_history,
    rates,
)
from conveyor.errors import InvalidRequest, QueueNotFound
from conveyor.model import WorkerEntry, WorkerRun
from conveyor.server.testing import InProcessRemoteEngine, http_client
from tests.cli.support import Cli
from tests.conftest import ENGINES
from tests.waiting import wait_for


@pytest.fixture(params=["sqlite", "postgres"])
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[conveyor.Conveyor]:
    client = ENGINES[request.param](tmp_path)
    try:
        yield client
    finally:
        client.close()


def qualifier(client: conveyor.Conveyor) -> str:
    """How the history names the client's queues: ``ACCOUNT/`` before the name of an account's view."""
    account = client.engine.deployment().account
    return f"{account}/" if account else ""


def test_recorder_keeps_each_queues_figures_and_rates(deployment: conveyor.Conveyor) -> None:
    q = deployment.create_queue("orders")
    q.add_pull_consumer()
    deployment.create_queue("other")
    recorder = HistoryRecorder(deployment.engine)
    try:
        assert recorder() == 2
        q.send_batch([{"body": n} for n in range(5)])
        leased = q.pull(batch_size=2)
        q.ack([m.lease_id for m in leased[:1]])
        deployment.engine.record_worker(
            WorkerEntry("w1", "host", 1, 0, 0, (WorkerRun(q.id, q.name, "app:handle", None, 3),))
        )
        assert recorder() == 2
    finally:
        recorder.close()
    store = open_history(deployment.engine.deployment())
    try:
        prefix = qualifier(deployment)
        points = store.of_queue(f"{prefix}orders", 0)
        assert [p.backlog for p in points] == [0, 4]
        assert points[-1].in_flight == 1 and points[-1].concurrency == 3
        assert points[-1].sent == 5 and points[-1].acked == 1
        assert points[-1].oldest_ms > 0
        assert rates(points)[0].sent_per_second > 0
        assert set(store.of_prefix(prefix, 0)) == {f"{prefix}orders", f"{prefix}other"}
        assert store.of_prefix("another-account/", 0) == {}
        rows = history_rows(points)
        assert rows[0]["sent_per_second"] == 0.0 and rows[1]["backlog"] == 4
        store.prune(points[-1].at_ms)
        assert [p.backlog for p in store.of_queue(f"{prefix}orders", 0)] == [4]
    finally:
        store.close()


def test_the_overviews_reads_take_each_queues_newest_points_and_thin_the_backlog(
    deployment: conveyor.Conveyor,
) -> None:
    """The overview's two reads, in the database on both engines: each queue's newest two points,
    and a sparkline's backlog one value a bucket (the highest in it)."""
    prefix = "acme/"
    store = open_history(deployment.engine.deployment())
    try:
        store.record(
            [
                QueuePoint("q1", f"{prefix}a", at, backlog, 0, 0, 0, at // 1000, 0, 0, 0, 0)
                for at, backlog in ((0, 5), (10_000, 7), (50_000, 2), (60_000, 9), (70_000, 1), (130_000, 4))
            ]
            + [QueuePoint("q2", f"{prefix}b", 20_000, 3, 0, 0, 0, 0, 0, 0, 0, 0)]
            + [QueuePoint("q3", "another-account/c", 20_000, 3, 0, 0, 0, 0, 0, 0, 0, 0)]
        )
        newest = store.newest([f"{prefix}a", f"{prefix}b", f"{prefix}none"], 0)
        assert set(newest) == {f"{prefix}a", f"{prefix}b"}
        assert [p.at_ms for p in newest[f"{prefix}a"]] == [70_000, 130_000]
        assert [p.backlog for p in newest[f"{prefix}b"]] == [3]
        assert [p.at_ms for p in store.newest([f"{prefix}a"], 100_000)[f"{prefix}a"]] == [130_000]
        assert [p.at_ms for p in store.newest([f"{prefix}a"], 0, count=3)[f"{prefix}a"]] == [60_000, 70_000, 130_000]
        sparks = store.backlog_by_bucket([f"{prefix}a", f"{prefix}b", f"{prefix}none"], 0, 60_000)
        assert sparks == {f"{prefix}a": [7, 9, 4], f"{prefix}b": [3], f"{prefix}none": []}
        assert store.backlog_by_bucket([f"{prefix}a"], 60_000, 60_000) == {f"{prefix}a": [9, 4]}
        with pytest.raises(InvalidRequest, match="at least 1 ms"):
            store.backlog_by_bucket([f"{prefix}a"], 0, 0)
    finally:
        store.close()


def test_no_points_make_no_rows() -> None:
    assert history_rows([]) == [] and rates([]) == []


def test_coordinator_records_history_on_its_interval(deployment: conveyor.Conveyor) -> None:
    deployment.create_queue("ticks").send("x", content_type="text")
    coordinator = Coordinator(deployment.engine, history=HistorySettings(interval=0.2))
    store = open_history(deployment.engine.deployment())
    name = f"{qualifier(deployment)}ticks"
    coordinator.start()
    try:
        wait_for(lambda: len(store.of_queue(name, 0)) >= 2, what="two history points")
    finally:
        coordinator.stop()
        store.close()


def test_coordinator_refuses_a_history_interval_too_short(data_dir: Path) -> None:
    cv = conveyor.connect(f"sqlite://{data_dir}")
    try:
        with pytest.raises(ValueError, match="history interval must be at least"):
            Coordinator(cv.engine, history=HistorySettings(interval=0.01))
    finally:
        cv.close()


def test_queues_info_history_prints_points(data_dir: Path) -> None:
    url = f"sqlite://{data_dir}"
    cv = conveyor.connect(url)
    try:
        cv.create_queue("jobs").send_batch([{"body": n} for n in range(3)])
        recorder = HistoryRecorder(cv.engine)
        recorder()
        recorder.close()
    finally:
        cv.close()
    run = Cli(url)
    data = run.json("queues", "info", "jobs", "--history")
    assert data["queue_name"] == "jobs"
    assert [row["backlog"] for row in data["history"]] == [3]
    assert "jobs: history" in run.ok("queues", "info", "jobs", "--history").stdout
    run.fails("queues", "info", "missing", "--history", code=10104)


def test_a_client_of_a_server_reads_the_history_the_server_keeps(tmp_path: Path) -> None:
    remote = http_client(tmp_path / "data", "acme")
    try:
        remote.create_queue("far").send_batch([{"body": n} for n in range(2)])
        assert isinstance(remote.engine, InProcessRemoteEngine)
        recorder = HistoryRecorder(remote.engine.server_engine)
        recorder()
        recorder.close()
        assert [row["backlog"] for row in queue_history(remote, "far", 5)] == [2]
        with pytest.raises(QueueNotFound):
            queue_history(remote, "nowhere", 5)
        with pytest.raises(InvalidRequest, match="minutes"):
            remote.engine.queue_history(remote.queue("far").id, 0)
    finally:
        remote.close()
