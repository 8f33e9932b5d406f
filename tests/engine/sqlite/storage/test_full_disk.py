"""A real full disk (a small tmpfs mounted for the test): space can be won back through the API.
Purging and deleting a queue work on it (the engine's reserve file is given up for them and made
anew afterwards), a queue is created whole or not at all, a pull works or fails saying what to do,
and the other queues' messages are untouched. The same over HTTP: no 507 for purge and delete."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import conveyor
from conveyor.engine.sqlite.doctor import examine
from conveyor.engine.sqlite.reserve import RESERVE_BYTES, RESERVE_ENV
from conveyor.server.testing import running_server

# Room for the reserve (17 MiB) and some 30 MiB of messages.
DISK = "48m"
KILOBYTE = "k" * 1000


@pytest.fixture
def small_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A 48 MiB tmpfs at ``tmp_path/disk``, unmounted afterwards; deployments keep the real reserve."""
    monkeypatch.setenv(RESERVE_ENV, str(RESERVE_BYTES))
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(mount_point)], check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "--lazy", str(mount_point)], check=True)


def free_bytes(path: Path) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def fill(queue: conveyor.Queue) -> int:
    """Send 1 KB messages until the disk is full (batches of 100, then 10, then 1); returns how many
    were stored."""
    stored = 0
    for size in (100, 10, 1):
        try:
            while True:
                queue.send_batch([{"body": KILOBYTE, "content_type": "text"}] * size)
                stored += size
        except conveyor.StorageFull:
            pass
    return stored


def shard_files(data: Path, queue_id: str) -> list[Path]:
    return sorted((data / "shards").glob(f"{queue_id}.*"))


def test_purge_and_delete_work_on_a_full_disk_and_give_the_space_back(small_disk: Path) -> None:
    data = small_disk / "data"
    with conveyor.connect(f"sqlite://{data}") as cv:
        other = cv.create_queue("other")
        other.send_batch([{"body": {"n": n}} for n in range(10)])
        filled = cv.create_queue("filled")
        stored = fill(filled)
        assert stored > 10_000
        with pytest.raises(conveyor.StorageFull, match="purging or deleting a queue works on a full disk"):
            filled.send("one more", content_type="text")

        assert filled.purge() == stored
        assert filled.metrics().backlog_count == 0
        filled.send("after the purge", content_type="text")
        assert (data / "reserve").stat().st_size == RESERVE_BYTES

        fill(filled)
        filled_id = filled.id
        assert filled.delete() == []
        assert shard_files(data, filled_id) == []
        assert free_bytes(small_disk) > 20 * 2**20
        assert (data / "reserve").stat().st_size == RESERVE_BYTES

        assert [m.body for m in other.peek(20)] == [{"n": n} for n in range(10)]
        cv.create_queue("fresh").send("works", content_type="text")
    assert examine(data).ok


def test_a_queue_created_on_a_full_disk_is_made_whole_or_not_at_all(small_disk: Path) -> None:
    data = small_disk / "data"
    with conveyor.connect(f"sqlite://{data}") as cv:
        fill(cv.create_queue("filled"))
        shards_before = sorted((data / "shards").iterdir())

        with pytest.raises(conveyor.StorageFull, match="queue 'late' was not created"):
            cv.create_queue("late")
        assert [q.queue_name for q in cv.list_queues()] == ["filled"]
        with pytest.raises(conveyor.QueueNotFound):
            cv.queue("late")
        assert sorted((data / "shards").iterdir()) == shards_before

        cv.queue("filled").purge()
        cv.create_queue("late").send("made", content_type="text")
        assert [m.body for m in cv.queue("late").peek()] == ["made"]
    assert examine(data).ok


def test_pull_on_a_full_disk_works_or_fails_saying_what_to_do(small_disk: Path) -> None:
    data = small_disk / "data"
    with conveyor.connect(f"sqlite://{data}") as cv:
        queue = cv.create_queue("filled")
        queue.add_pull_consumer(batch_size=10)
        stored = fill(queue)
        try:
            pulled = queue.pull(batch_size=10)
        except conveyor.StorageFull as exc:
            assert "purging or deleting a queue works on a full disk" in str(exc)
        else:
            assert len(pulled) == 10
            queue.ack(acks=[m.lease_id for m in pulled])
            stored -= 10
        assert queue.metrics().backlog_count == stored


def test_purge_and_delete_over_http_work_on_a_full_disk(small_disk: Path) -> None:
    data = small_disk / "data"
    with running_server(f"sqlite://{data}") as server, server.connect("acc1") as cv:
        kept = cv.create_queue("kept")
        kept.send_batch([{"body": {"n": n}} for n in range(10)])
        first, second = cv.create_queue("first"), cv.create_queue("second")
        stored = fill(first) + fill(second)
        assert stored > 10_000

        assert first.purge() > 0
        assert first.metrics().backlog_count == 0
        second.delete()
        assert [q.queue_name for q in cv.list_queues()] == ["first", "kept"]
        assert kept.metrics().backlog_count == 10
        first.send("after", content_type="text")
    shutil.rmtree(data)


def test_the_reserve_size_comes_from_the_environment_and_a_bad_one_is_refused(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RESERVE_ENV, "17M")
    with pytest.raises(conveyor.InvalidRequest, match="CONVEYOR_RESERVE_BYTES is '17M'; it must be a whole number"):
        conveyor.connect(f"sqlite://{data_dir}")
    assert not data_dir.exists()
    monkeypatch.setenv(RESERVE_ENV, "0")
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        cv.create_queue("small").send("no reserve", content_type="text")
    assert not (data_dir / "reserve").exists()
    monkeypatch.setenv(RESERVE_ENV, "65536")
    conveyor.connect(f"sqlite://{data_dir}").close()
    assert (data_dir / "reserve").stat().st_size == 65536


def test_a_dead_letter_queue_that_cannot_be_made_on_a_full_disk_says_storage_full(small_disk: Path) -> None:
    data = small_disk / "data"
    with conveyor.connect(f"sqlite://{data}") as cv:
        work = cv.create_queue("work")
        work.add_pull_consumer(max_retries=0, dead_letter_queue="dead")
        work.send("last try", content_type="text")
        (message,) = work.pull()
        filled = cv.create_queue("filled")
        fill(filled)

        with pytest.raises(conveyor.StorageFull, match="queue 'dead' was not created"):
            work.ack(retries=[message.lease_id])
        assert work.metrics().backlog_count == 1  # still held: copied to the dead letter queue first

        filled.purge()
        work.ack(retries=[message.lease_id])  # its lease still holds
        assert [m.body for m in cv.queue("dead").peek()] == ["last try"]
        assert work.metrics().backlog_count == 0
    assert examine(data).ok
