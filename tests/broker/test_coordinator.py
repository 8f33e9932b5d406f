"""The coordinator: leadership through the directory lock, retention expiry, shard splits."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

import conveyor
from conveyor import limits
from conveyor.broker import coordinator as coordinator_module
from conveyor.broker.coordinator import Coordinator, ShardSplitter
from conveyor.engine.sqlite import SQLiteEngine
from tests.waiting import wait_for


class ManualClock:
    def __init__(self) -> None:
        self.ms = 1_800_000_000_000

    def now_ms(self) -> int:
        return self.ms


def test_only_one_process_leads_and_another_takes_over_when_it_dies(data_dir: Path) -> None:
    SQLiteEngine(data_dir).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from conveyor.engine.sqlite import SQLiteEngine;"
            f"e = SQLiteEngine({str(data_dir)!r}); assert e.acquire_leadership(); print('leading', flush=True);"
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "leading"
        engine = SQLiteEngine(data_dir)
        assert not engine.acquire_leadership()
        holder.kill()
        holder.wait()
        assert engine.acquire_leadership()
        engine.close()
    finally:
        holder.kill()
        holder.wait()


def test_leadership_is_released_on_close(data_dir: Path) -> None:
    first, second = SQLiteEngine(data_dir), SQLiteEngine(data_dir)
    assert first.acquire_leadership()
    assert not second.acquire_leadership()
    first.close()
    assert second.acquire_leadership()
    second.close()


def test_coordinator_expires_messages_past_retention(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock()
    cv = conveyor.Conveyor(SQLiteEngine(data_dir, clock=clock))
    q = cv.create_queue("short", message_retention_period=60)
    q.send_batch([{"body": n} for n in range(5)])
    clock.ms += 61_000
    q.send("fresh", content_type="text")
    monkeypatch.setattr(coordinator_module, "RETENTION_INTERVAL", 0.05)
    coordinator = Coordinator(cv.engine)
    coordinator.start()
    try:
        deadline = time.monotonic() + 10
        while q.counters().expired < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        coordinator.stop()
    assert q.counters().expired == 5
    assert [m.body for m in q.peek(10)] == ["fresh"]
    cv.close()


def test_a_queue_writing_faster_than_the_split_rate_gets_another_shard(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cv = conveyor.connect(f"sqlite://{data_dir}")
    q = cv.create_queue("busy")
    monkeypatch.setattr(limits, "SHARD_SPLIT_RATE", 100.0)
    split = ShardSplitter(cv.engine)
    split()  # the first sample only records the counter
    for _ in range(10):
        q.send_batch([{"body": n} for n in range(100)])
    split()
    assert q.info().shards == 2
    # Both shards are drained by a consumer: nothing is stranded in the old one.
    q.send_batch([{"body": "after"}])
    app = conveyor.App(cv)
    seen: list[object] = []

    @app.consumer("busy", max_batch_size=100, max_batch_timeout=0)
    def handle(batch: conveyor.MessageBatch) -> None:
        seen.extend(m.body for m in batch.messages)

    assert app.drain(timeout=30)
    assert len(seen) == 1001
    cv.close()


def test_a_quiet_queue_keeps_its_shards(data_dir: Path) -> None:
    cv = conveyor.connect(f"sqlite://{data_dir}")
    q = cv.create_queue("quiet")
    split = ShardSplitter(cv.engine)
    split()
    q.send("one", content_type="text")
    split()
    assert q.info().shards == 1
    cv.close()


def test_worker_processes_of_one_app_starting_together_all_register(data_dir: Path) -> None:
    cv = conveyor.connect(f"sqlite://{data_dir}")
    cv.create_queue("work")
    go, ready = data_dir / "go", data_dir / "ready"
    ready.mkdir()
    script = (
        "import os, time, conveyor\n"
        f"app = conveyor.App('sqlite://{data_dir}')\n"
        "@app.consumer('work')\n"
        "def handle(batch): pass\n"
        "handle.__module__ = 'jobs'\n"
        "handle.__qualname__ = 'handle'\n"
        f"open(os.path.join({str(ready)!r}, str(os.getpid())), 'w').close()\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.001)\n"
        "app.start(); app.stop(grace=1)\n"
    )
    starters = [subprocess.Popen([sys.executable, "-c", script]) for _ in range(8)]
    # Every process imported and waiting: they start within a millisecond of each other.
    wait_for(lambda: len(list(ready.iterdir())) == len(starters), timeout=60, what="the eight processes ready")
    go.touch()
    assert [p.wait(timeout=60) for p in starters] == [0] * 8
    consumer = cv.queue("work").consumer()
    assert consumer is not None and consumer.script_name == "jobs:handle"
    cv.close()


def test_a_coordinator_that_cannot_contest_leadership_says_so_once_and_leads_when_it_can(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(coordinator_module, "LEADERSHIP_RETRY", 0.02)
    caplog.set_level(logging.INFO, logger="conveyor.coordinator")
    engine = SQLiteEngine(data_dir)
    lock = data_dir / "coordinator.lock"
    lock.mkdir()  # the lock file cannot be opened
    coordinator = Coordinator(engine)
    coordinator.start()
    try:
        deadline = time.monotonic() + 5
        while not caplog.records and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # some ten more rounds, none of them logged
        assert not coordinator.leader
        lock.rmdir()
        deadline = time.monotonic() + 5
        while not coordinator.leader and time.monotonic() < deadline:
            time.sleep(0.01)
        assert coordinator.leader
    finally:
        coordinator.stop()
        engine.close()
    messages = [r.getMessage() for r in caplog.records]
    assert len([m for m in messages if m.startswith("contesting coordinator leadership failed")]) == 1
    assert "this process is the coordinator" in messages
