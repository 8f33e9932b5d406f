"""The catalog snapshot: queue settings and shard maps shared between processes through mmapsync.

The cross-process tests drive a real second process (``catalog_peer.py``) that opened the deployment
once and never reopens it, and check what that process does on its very next send, read or lease.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

import conveyor
from conveyor.broker.coordinator import Coordinator
from conveyor.engine.sqlite import SQLiteEngine
from conveyor.engine.sqlite.snapshot import CatalogSnapshot, decode
from conveyor.engine.sqlite.snapshot_store import SnapshotStore
from conveyor.mmapsync import Synchronizer
from tests.waiting import wait_for

PEER = Path(__file__).with_name("catalog_peer.py")
HOUR = 3600
DEFAULT_RETENTION = 345600


class Peer:
    """A ``catalog_peer.py`` process with the queue open."""

    def __init__(self, data_dir: Path, queue: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(PEER), str(data_dir), queue],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.ask(None) == "ready"

    def ask(self, command: str | None) -> object:
        assert self.process.stdin is not None and self.process.stdout is not None
        if command is not None:
            self.process.stdin.write(command + "\n")
            self.process.stdin.flush()
        line = self.process.stdout.readline()
        return json.loads(line) if line else None

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def sqlite_engine(cv: conveyor.Conveyor) -> SQLiteEngine:
    """The SQLite engine under the client's account view (its catalog, its snapshot)."""
    return cast(SQLiteEngine, cv.engine.deployment_engine())


@pytest.fixture
def cv(data_dir: Path) -> Iterator[conveyor.Conveyor]:
    client = conveyor.connect(f"sqlite://{data_dir}")
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def peer(cv: conveyor.Conveyor, data_dir: Path) -> Iterator[Peer]:
    cv.create_queue("jobs")
    process = Peer(data_dir, "jobs")
    try:
        yield process
    finally:
        process.stop()


def published(data_dir: Path) -> CatalogSnapshot:
    """The snapshot as a fresh reader sees it."""
    with Synchronizer(data_dir / "snapshot" / "catalog", decode=decode) as sync, sync.read() as snapshot:
        return snapshot


def delayed_by(q: conveyor.Queue) -> float:
    """Seconds from now until the queue's only message becomes deliverable."""
    visible = q._engine.next_visible_ms(q.id)
    assert visible is not None
    return (visible - time.time() * 1000) / 1000


def test_a_producer_process_sends_with_the_delay_another_process_just_set(cv: conveyor.Conveyor, peer: Peer) -> None:
    q = cv.queue("jobs")
    assert peer.ask("send") == "sent"
    assert delayed_by(q) <= 0
    q.purge()
    q.update(delivery_delay=HOUR)
    assert peer.ask("send") == "sent"
    assert delayed_by(q) > HOUR - 60


def test_a_process_reads_a_pause_set_by_another_process_on_its_next_read(cv: conveyor.Conveyor, peer: Peer) -> None:
    assert peer.ask("settings") == {
        "delivery_delay": 0,
        "delivery_paused": False,
        "message_retention_period": DEFAULT_RETENTION,
    }
    cv.queue("jobs").pause_delivery()
    assert peer.ask("settings") == {
        "delivery_delay": 0,
        "delivery_paused": True,
        "message_retention_period": DEFAULT_RETENTION,
    }


def test_a_producer_process_writes_to_a_shard_another_process_added(
    cv: conveyor.Conveyor, peer: Peer, data_dir: Path
) -> None:
    q = cv.queue("jobs")
    assert peer.ask("send") == "sent"  # the peer takes producer slot 1: with one shard, shard 0
    cv.engine.add_shard(q.id)
    assert peer.ask("send") == "sent"  # slot 1 of two active shards: the new shard 1
    with sqlite3.connect(data_dir / "shards" / f"{q.id}.1.db") as shard:
        assert shard.execute("SELECT count(*) FROM messages").fetchone() == (1,)


def test_a_consumer_process_leases_from_a_shard_another_process_added(
    cv: conveyor.Conveyor, peer: Peer, data_dir: Path
) -> None:
    q = cv.queue("jobs")
    assert peer.ask("lease") == 0  # the peer now holds the one-shard map
    cv.engine.add_shard(q.id)
    q.send_batch([{"body": n} for n in range(3)])  # this process takes slot 1: the new shard 1
    assert peer.ask("lease") == 3


def test_a_snapshot_left_behind_by_a_publisher_that_died_is_republished(
    cv: conveyor.Conveyor, peer: Peer, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = cv.queue("jobs")
    assert peer.ask("die-after-commit 77") is None  # killed between the catalog commit and its publish
    assert published(data_dir).generation == sqlite_engine(cv).catalog.generation() - 1
    assert cv.engine.queue_settings(q.id).delivery_delay == 0  # the stale snapshot, until repaired

    # A process opening the directory republishes at once.
    SQLiteEngine(data_dir).close()
    assert published(data_dir).generation == sqlite_engine(cv).catalog.generation()
    assert cv.engine.queue_settings(q.id).delivery_delay == 77

    # So does the coordinator, within a few seconds, for processes that are already running.
    dying = Peer(data_dir, "jobs")
    assert dying.ask("die-after-commit 78") is None
    dying.stop()
    assert cv.engine.queue_settings(q.id).delivery_delay == 77
    coordinator = Coordinator(sqlite_engine(cv))
    coordinator.start()
    try:
        deadline = time.monotonic() + 15
        while cv.engine.queue_settings(q.id).delivery_delay != 78 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        coordinator.stop()
    assert cv.engine.queue_settings(q.id).delivery_delay == 78


def scribble(path: Path, offset: int = 0, size: int | None = None) -> None:
    """Overwrite part of a file in place (never shortening it: that would SIGBUS its mappers)."""
    length = path.stat().st_size - offset if size is None else size
    with open(path, "r+b") as file:
        file.seek(offset)
        file.write(b"\xa5" * length)


@pytest.mark.parametrize("damaged", ["data files", "state file"])
def test_a_corrupt_snapshot_falls_back_to_the_catalog_logs_once_and_is_rebuilt(
    cv: conveyor.Conveyor, data_dir: Path, caplog: pytest.LogCaptureFixture, damaged: str
) -> None:
    q = cv.create_queue("jobs", delivery_delay=5)
    pattern = "catalog_data_*" if damaged == "data files" else "catalog_state"
    for path in (data_dir / "snapshot").glob(pattern):
        scribble(path)
    with caplog.at_level(logging.WARNING, logger="conveyor.engine"):
        assert cv.engine.queue_settings(q.id).delivery_delay == 5
        logged = len(caplog.records)
        assert [cv.engine.queue_settings(q.id).delivery_delay for _ in range(3)] == [5, 5, 5]
        q.send("x", content_type="text")
    assert 1 <= logged == len(caplog.records)
    assert all("catalog snapshot" in record.getMessage() for record in caplog.records)
    assert published(data_dir).queues[q.id].settings.delivery_delay == 5
    assert delayed_by(q) > 0


def test_a_process_opening_a_directory_whose_snapshot_was_removed_publishes_it_again(
    cv: conveyor.Conveyor, data_dir: Path
) -> None:
    q = cv.create_queue("jobs", delivery_delay=5)
    for path in (data_dir / "snapshot").iterdir():
        path.unlink()
    other = SQLiteEngine(data_dir)
    try:
        assert other.queue_settings(q.id).delivery_delay == 5
    finally:
        other.close()
    assert published(data_dir).queues[q.id].settings.delivery_delay == 5


def test_a_snapshot_too_damaged_to_open_is_replaced_and_running_processes_follow(
    cv: conveyor.Conveyor, peer: Peer, data_dir: Path
) -> None:
    q = cv.queue("jobs")
    assert peer.ask("settings") is not None  # the peer has the snapshot mapped
    # A damaged header: processes that mapped the file read on, but none can open it any more.
    scribble(data_dir / "snapshot" / "catalog_state", offset=8, size=8)
    SQLiteEngine(data_dir).close()  # it cannot open the snapshot, so it replaces it
    assert published(data_dir).generation == sqlite_engine(cv).catalog.generation()
    # The running processes map the replaced file: at their next identity check they follow the new one.
    q.update(delivery_delay=HOUR)
    wait_for(lambda: (peer.ask("settings") or {}).get("delivery_delay") == HOUR, what="the peer to follow the new file")
    assert peer.ask("settings") == {
        "delivery_delay": HOUR,
        "delivery_paused": False,
        "message_retention_period": 345600,
    }


def test_a_publisher_overtaken_by_a_newer_catalog_write_never_replaces_the_newer_snapshot(
    cv: conveyor.Conveyor, data_dir: Path
) -> None:
    q = cv.create_queue("jobs")
    catalog = sqlite_engine(cv).catalog
    old = catalog.snapshot()  # what a slow publisher read before the next write

    class Slow:
        def generation(self) -> int:
            return catalog.generation()

        def snapshot(self) -> CatalogSnapshot:
            return old

    q.update(delivery_delay=9)  # committed and published by this process
    slow = SnapshotStore(data_dir / "snapshot" / "catalog", Slow())
    try:
        assert slow.publish() is False
    finally:
        slow.close()
    assert published(data_dir).generation == catalog.generation()
    assert published(data_dir).queues[q.id].settings.delivery_delay == 9


def test_concurrent_writers_in_two_processes_leave_the_latest_catalog_published(
    cv: conveyor.Conveyor, data_dir: Path
) -> None:
    q = cv.create_queue("jobs")
    script = (
        "import sys, conveyor\n"
        "q = conveyor.connect(sys.argv[1]).queue('jobs')\n"
        "for n in range(40): q.update(delivery_delay=int(sys.argv[2]) + n)\n"
    )
    writers = [
        subprocess.Popen([sys.executable, "-c", script, f"sqlite://{data_dir}", str(base)]) for base in (1000, 2000)
    ]
    assert [w.wait() for w in writers] == [0, 0]
    snapshot = published(data_dir)
    assert snapshot.generation == sqlite_engine(cv).catalog.generation()
    assert snapshot.queues[q.id].settings == q.info().settings
