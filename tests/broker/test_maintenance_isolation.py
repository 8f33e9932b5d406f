"""One queue with a corrupt shard: the coordinator's services skip it and go on with every other
queue, and report it once when it goes bad and once when it is repaired, not every round."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

import conveyor
from conveyor import limits
from conveyor.broker.coordinator import Coordinator, ShardSplitter
from conveyor.engine.sqlite import SQLiteEngine


class ManualClock:
    def __init__(self) -> None:
        self.ms = 1_800_000_000_000

    def now_ms(self) -> int:
        return self.ms


def shard_of(data_dir: Path, queue_id: str) -> Path:
    return data_dir / "shards" / f"{queue_id}.0.db"


def garble_header(path: Path) -> bytes:
    """Overwrite the file's header with random bytes; returns the good bytes."""
    original = path.read_bytes()
    path.write_bytes(os.urandom(100) + original[100:])
    return original


def reports_about(caplog: pytest.LogCaptureFixture, queue: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if f"queue {queue} " in r.getMessage()]


def two_queues(data_dir: Path, clock: ManualClock) -> dict[str, str]:
    """Queues ``kept`` and ``victim``, 100 messages each, 60 s retention; returns their ids."""
    with conveyor.Conveyor(SQLiteEngine(data_dir, clock=clock)) as cv:
        ids = {}
        for name in ("kept", "victim"):
            q = cv.create_queue(name, message_retention_period=60)
            q.send_batch([{"body": n} for n in range(100)])
            ids[name] = q.id
        return ids


def test_retention_skips_a_corrupt_queue_reports_it_once_and_expires_the_others(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    ids = two_queues(data_dir, clock)
    victim = shard_of(data_dir, ids["victim"])
    original = garble_header(victim)
    clock.ms += 300_000
    engine = SQLiteEngine(data_dir, clock=clock)
    caplog.set_level(logging.INFO)

    assert engine.expire() == {ids["kept"]: 100}
    assert engine.expire() == {}
    (report,) = reports_about(caplog, "victim")
    assert report.startswith("retention expiry skips queue victim") and str(victim) in report
    assert not any(r.exc_info for r in caplog.records), "a traceback was logged for a known storage error"
    assert list(engine.expiry_faults.failing()) == [ids["victim"]]

    victim.write_bytes(original)  # repaired under the running engine
    assert engine.expire() == {ids["victim"]: 100}
    assert reports_about(caplog, "victim")[-1].startswith("retention expiry works again for queue victim")
    assert engine.expiry_faults.failing() == {}
    engine.close()


def test_shard_split_goes_on_past_a_corrupt_queue(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ids = two_queues(data_dir, ManualClock())
    garble_header(shard_of(data_dir, ids["kept"]))  # listed first: `victim` comes after it
    monkeypatch.setattr(limits, "SHARD_SPLIT_RATE", 100.0)
    cv = conveyor.Conveyor(SQLiteEngine(data_dir))  # the coordinator's view: every account's queues
    split = ShardSplitter(cv.engine)
    split()
    for _ in range(10):
        cv.queue("victim").send_batch([{"body": n} for n in range(100)])
    split()
    split()
    assert cv.queue("victim").info().shards == 2
    assert len(reports_about(caplog, "kept")) == 1
    cv.close()


def test_a_failing_service_logs_its_traceback_once_not_every_round(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    engine = SQLiteEngine(data_dir)
    coordinator = Coordinator(engine)
    rounds = 0

    def broken() -> None:
        nonlocal rounds
        rounds += 1
        if rounds < 4:
            raise RuntimeError("catalog unreadable")

    for _ in range(5):
        coordinator._run("broken", broken)
    assert [r.getMessage() for r in caplog.records] == [
        "coordinator service broken failed (reported again only if the error changes)",
        "coordinator service broken works again",
    ]
    engine.close()
