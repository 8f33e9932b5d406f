"""The queue history: the coordinator's points per queue on SQLite and PostgreSQL, their rates, the
prune, and ``conveyor queues info --history``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import conveyor
from conveyor.broker.coordinator import Coordinator
from conveyor.client.history import queue_history
from conveyor.engine.history import (
    LATEST_FIGURES,
    HistoryRecorder,
    HistorySettings,
    QueuePoint,
    history_rows,
    open_history,
    rates,
)
from conveyor.errors import InvalidRequest, QueueNotFound
from conveyor.model import WorkerEntry, WorkerRun
from conveyor.server.dash import views
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
        assert store.latest_figures(prefix, 0, "backlog") == {f"{prefix}orders": 4, f"{prefix}other": 0}
        assert store.latest_figures("another-account/", 0, "backlog") == {}
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


def test_the_newest_point_table_follows_the_points_recorded_and_pruned(deployment: conveyor.Conveyor) -> None:
    """queue_latest, kept with the points: each queue's newest point and the one before it, the
    same points as the seek into the history finds, through records out of order, repeats and
    prunes; the overview's figures from it are those its ranking computed from the points."""
    prefix = "acme/"
    names = [f"{prefix}a", f"{prefix}b", f"{prefix}c", "other/a"]
    store = open_history(deployment.engine.deployment())

    def point(name: str, at: int, backlog: int, sent: int, oldest: int = 0) -> QueuePoint:
        return QueuePoint(f"id-{name}", name, at, backlog, backlog * 10, oldest, backlog // 2, sent, 1, 2, 3, 4)

    def agrees(since: int) -> None:
        assert store.latest(names, since) == store.newest(names, since, 2)

    try:
        assert store.latest(names, 0) == {} and store.latest_figures(prefix, 0, "backlog") == {}
        store.record([point(f"{prefix}a", 10_000, 5, 100, oldest=4_000), point(f"{prefix}b", 10_000, 9, 0)])
        agrees(0)
        assert [p.at_ms for p in store.latest([f"{prefix}a"], 0)[f"{prefix}a"]] == [10_000]
        store.record([point(f"{prefix}a", 20_000, 7, 300, oldest=4_000), point("other/a", 20_000, 50, 0)])
        store.record([point(f"{prefix}a", 15_000, 99, 200), point(f"{prefix}a", 20_000, 98, 998)])  # late, repeated
        agrees(0)
        agrees(15_000)
        newest = store.latest([f"{prefix}a"], 0)[f"{prefix}a"]
        assert [(p.at_ms, p.backlog) for p in newest] == [(15_000, 99), (20_000, 7)]
        assert store.latest_figures(prefix, 0, "backlog") == {f"{prefix}a": 7.0, f"{prefix}b": 9.0}
        assert store.latest_figures(prefix, 0, "oldest") == {f"{prefix}a": 16.0, f"{prefix}b": 0.0}
        assert store.latest_figures(prefix, 0, "sent") == {f"{prefix}a": 20.0, f"{prefix}b": 0.0}
        assert store.latest_figures(prefix, 16_000, "sent") == {f"{prefix}a": 0.0}  # the point before is older
        assert store.latest_figures(prefix, 0, "in_flight")[f"{prefix}a"] == 3.0
        assert store.latest_figures(prefix, 0, "concurrency")[f"{prefix}a"] == 4.0
        assert set(store.latest_figures("", 0, "backlog")) == {f"{prefix}a", f"{prefix}b", "other/a"}
        for figure in LATEST_FIGURES:  # the ranking from the table is the one from the points
            figures = store.latest_figures(prefix, 0, figure)
            points = store.newest(names, 0, 2)
            for descending in (False, True):
                assert views.rank_by_figure(names[:3], figures, descending) == views.rank_names(
                    names[:3], points, figure, descending
                )
        with pytest.raises(InvalidRequest, match="sorts by one of"):
            store.latest_figures(prefix, 0, "name")
        store.prune(16_000)  # a's point before goes, b's only point goes
        agrees(0)
        assert [p.at_ms for p in store.latest([f"{prefix}a"], 0)[f"{prefix}a"]] == [20_000]
        assert set(store.latest_figures(prefix, 0, "backlog")) == {f"{prefix}a"}
        store.record([point(f"{prefix}a", 30_000, 1, 400)])
        agrees(0)
    finally:
        store.close()


def test_a_version_1_history_file_gets_its_newest_points_filled_on_open(tmp_path: Path) -> None:
    """history.db of version 1 (no queue_latest) opened by this Conveyor: upgraded in place to
    version 2, its newest-point table filled from the points it holds."""
    data = tmp_path / "data"
    conveyor.connect(f"sqlite://{data}").close()
    old = sqlite3.connect(data / "history.db")
    old.executescript((Path(__file__).parent / "history_v1.sql").read_text())
    rows = [("q1", "acme/a", at, at // 1000, 0, 0, 0, at // 100, 0, 0, 0, 0) for at in (1_000, 2_000, 3_000)]
    rows.append(("q2", "acme/b", 5_000, 8, 0, 0, 0, 0, 0, 0, 0, 0))
    old.executemany(f"INSERT INTO queue_history VALUES ({', '.join('?' * 12)})", rows)
    old.commit()
    old.close()
    cv = conveyor.connect(f"sqlite://{data}")
    store = open_history(cv.engine.deployment())
    try:
        names = ["acme/a", "acme/b"]
        assert store.latest(names, 0) == store.newest(names, 0, 2)
        assert [p.at_ms for p in store.latest(names, 0)["acme/a"]] == [2_000, 3_000]
        assert store.latest_figures("acme/", 0, "backlog") == {"acme/a": 3.0, "acme/b": 8.0}
        store.record([QueuePoint("q1", "acme/a", 4_000, 4, 0, 0, 0, 40, 0, 0, 0, 0)])
        assert [p.at_ms for p in store.latest(names, 0)["acme/a"]] == [3_000, 4_000]
    finally:
        store.close()
        cv.close()
    check = sqlite3.connect(data / "history.db")
    try:
        assert check.execute("PRAGMA user_version").fetchone() == (2,)
    finally:
        check.close()


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
