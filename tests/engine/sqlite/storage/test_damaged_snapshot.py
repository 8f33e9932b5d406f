"""The catalog snapshot (``snapshot/catalog_*``, a shared-memory copy of the catalog that sends and
leases read) damaged or taken from another directory: the engine falls back to ``catalog.db`` and
rebuilds it, so every answer stays right and every message stays readable."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

import conveyor

from .seeded_storage import MESSAGES_PER_QUEUE, SeededDirectory, seed, stored_numbers


def snapshot_files(data_dir: Path) -> list[Path]:
    files = [p for p in sorted((data_dir / "snapshot").glob("catalog_*")) if p.is_file() and p.stat().st_size]
    assert files, f"no catalog snapshot in {data_dir}"
    return files


def overwrite_in_place(path: Path) -> None:
    """Random bytes written into the file itself, as a bad disk would: processes that mapped it see them."""
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.write(os.urandom(size))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "random bytes": overwrite_in_place,
    "truncated": lambda path: os.truncate(path, path.stat().st_size // 2),
    "emptied": lambda path: os.truncate(path, 0),
}


def assert_sends_and_reads_are_right(cv: conveyor.Conveyor) -> None:
    assert sorted(q.queue_name for q in cv.list_queues()) == ["kept", "victim"]
    for name in ("kept", "victim"):
        queue = cv.queue(name)
        queue.send({"n": MESSAGES_PER_QUEUE})
        assert stored_numbers(cv, name) == list(range(MESSAGES_PER_QUEUE + 1))
        assert queue.metrics().backlog_count == MESSAGES_PER_QUEUE + 1


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_snapshot_falls_back_to_the_catalog(seeded: SeededDirectory, damage: str) -> None:
    for path in snapshot_files(seeded.data_dir):
        DAMAGE[damage](path)

    with conveyor.connect(seeded.url) as cv:
        assert_sends_and_reads_are_right(cv)


def test_snapshot_damaged_under_a_running_client_falls_back_to_the_catalog(seeded: SeededDirectory) -> None:
    with conveyor.connect(seeded.url) as cv:
        assert stored_numbers(cv, "kept") == list(range(MESSAGES_PER_QUEUE))
        for path in snapshot_files(seeded.data_dir):
            overwrite_in_place(path)
        assert_sends_and_reads_are_right(cv)


def test_snapshot_of_another_directory_is_not_believed(seeded: SeededDirectory, tmp_path: Path) -> None:
    other = seed(tmp_path / "other")
    with conveyor.connect(other.url) as cv:
        cv.queue("victim").delete()
        cv.create_queue("impostor")
    shutil.rmtree(seeded.data_dir / "snapshot")
    shutil.copytree(other.data_dir / "snapshot", seeded.data_dir / "snapshot")

    with conveyor.connect(seeded.url) as cv:
        with pytest.raises(conveyor.QueueNotFound):
            cv.queue("impostor")
        assert_sends_and_reads_are_right(cv)
    # Nothing was routed to a shard of the other directory's queues.
    shards = sorted(p.name for p in (seeded.data_dir / "shards").glob("*.db"))
    assert shards == sorted(seeded.shard(q).name for q in (seeded.kept_id, seeded.victim_id))
