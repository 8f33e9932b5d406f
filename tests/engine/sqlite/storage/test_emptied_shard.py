"""A shard file emptied, cut short or stripped of its write-ahead log behind Conveyor's back lost
messages: it is refused with CorruptStorage naming the file, never made anew as an empty queue.
A damaged ``-shm`` (an index SQLite rebuilds from the log) loses nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import conveyor
from conveyor.engine.sqlite.shard import PAGE_SIZE

from .seeded_storage import SeededDirectory, assert_all_stored, stored_numbers

DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "emptied": (lambda path: os.truncate(path, 0), r"is empty \(0 bytes"),
    "cut to its first page": (lambda path: os.truncate(path, PAGE_SIZE), r"is truncated: 8192 bytes"),
    "last page cut off": (lambda path: os.truncate(path, path.stat().st_size - PAGE_SIZE), "is truncated"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_emptied_or_truncated_shard_is_refused_naming_it(seeded: SeededDirectory, damage: str) -> None:
    shard = seeded.shard(seeded.victim_id)
    original = shard.read_bytes()
    cut, message = DAMAGE[damage]
    cut(shard)
    damaged = shard.read_bytes()

    with conveyor.connect(seeded.url) as cv:
        victim = cv.queue("victim")
        for call in (victim.metrics, lambda: victim.send({"n": -1}), victim.peek):
            with pytest.raises(conveyor.CorruptStorage, match=message) as raised:
                call()
            assert str(shard) in str(raised.value)
        assert stored_numbers(cv, "kept") == list(range(100))

    assert shard.read_bytes() == damaged, "the damaged file was written to"
    assert not Path(f"{shard}-wal").exists()
    shard.write_bytes(original)
    assert_all_stored(seeded)


def killed_producer(data_dir: Path, queue: str) -> None:
    """Send 50 messages from another process and SIGKILL it: they are committed to the shard's
    write-ahead log only (no checkpoint ran), with its ``-shm`` index beside it."""
    script = (
        "import os, signal, sys, conveyor;"
        "q = conveyor.connect(f'sqlite://{sys.argv[1]}').queue(sys.argv[2]);"
        "q.send_batch([{'body': {'n': 1000 + i}} for i in range(50)]);"
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    done = subprocess.run([sys.executable, "-c", script, str(data_dir), queue], check=False)
    assert done.returncode == -signal.SIGKILL


@pytest.mark.parametrize("damage", ["removed", "emptied"])
def test_shard_whose_unflushed_write_ahead_log_was_removed_is_refused(data_dir: Path, damage: str) -> None:
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        queue_id = cv.create_queue("logged").id
    killed_producer(data_dir, "logged")
    shard = data_dir / "shards" / f"{queue_id}.0.db"
    wal = Path(f"{shard}-wal")
    if damage == "removed":
        wal.unlink()
    else:
        os.truncate(wal, 0)
    before = {p: p.read_bytes() for p in shard.parent.iterdir()}

    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        lost = r"write-ahead log of .* (is missing|is 0 bytes), where its index says it held \d+ frames"
        with pytest.raises(conveyor.CorruptStorage, match=lost) as raised:
            cv.queue("logged").metrics()
        assert str(shard) in str(raised.value)
    assert {p: p.read_bytes() for p in shard.parent.iterdir()} == before


def test_write_ahead_log_cut_short_is_reported_and_its_intact_part_kept(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A log cut short could also be a power failure's work (unflushed leases at its end): SQLite
    keeps its intact commits, and the cut is logged, naming the file, rather than refused."""
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        queue_id = cv.create_queue("logged").id
        cv.queue("logged").send_batch([{"body": {"n": n}} for n in range(50)])
    killed_producer(data_dir, "logged")
    shard = data_dir / "shards" / f"{queue_id}.0.db"
    wal = Path(f"{shard}-wal")
    os.truncate(wal, wal.stat().st_size - 4096)

    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        assert stored_numbers(cv, "logged") == list(range(50)), "the checkpointed messages are kept"
    (warning,) = [r.getMessage() for r in caplog.records if "write-ahead log of" in r.getMessage()]
    assert str(shard) in warning and "the commits at its end are lost" in warning


@pytest.mark.parametrize("damage", ["emptied", "random bytes", "removed"])
def test_damaged_shm_index_loses_nothing(data_dir: Path, damage: str) -> None:
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        queue_id = cv.create_queue("indexed").id
    killed_producer(data_dir, "indexed")
    shm = data_dir / "shards" / f"{queue_id}.0.db-shm"
    if damage == "emptied":
        os.truncate(shm, 0)
    elif damage == "random bytes":
        shm.write_bytes(os.urandom(shm.stat().st_size))
    else:
        shm.unlink()

    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        assert stored_numbers(cv, "indexed") == list(range(1000, 1050))
