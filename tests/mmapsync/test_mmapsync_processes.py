"""Real processes: a writer publishing without pause under checking readers, crashed readers, forks."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event

import pytest

from conveyor.mmapsync import ReadersStillActive, Synchronizer, TooManyReaders
from tests.waiting import wait_for

from .mmapsync_workers import framed, hold_read, publish_until, read_and_check

Outcome = tuple[int, int, int, int]
spawn = multiprocessing.get_context("spawn")
fork = multiprocessing.get_context("fork")


def _kill(process: BaseProcess) -> None:
    if process.is_alive() and process.pid is not None:
        os.kill(process.pid, signal.SIGKILL)
    process.join(10)


def _start_holder(prefix: str) -> tuple[BaseProcess, Event, Event]:
    """A reader process holding a read until told to let go (it then says so and stays alive)."""
    holding, release, released = spawn.Event(), spawn.Event(), spawn.Event()
    process = spawn.Process(target=hold_read, args=(prefix, holding, release, released))
    process.start()
    assert holding.wait(30), "the reader process never took its read"
    return process, release, released


def _publish_under_readers(prefix: str, writers: int, readers: int) -> tuple[list[int], list[Outcome]]:
    """Writer processes publish back to back while reader processes check every read for 2 s, all
    started at once; the writers stop once the readers are done and each writer has published more
    than 10 versions.

    Returns how many versions each writer published and each reader's (reads, torn reads, sequence
    regressions, versions seen).
    """
    Synchronizer(prefix).write(framed(0, random.Random(0)))
    stop = spawn.Event()
    start = spawn.Barrier(writers + readers)
    progress = [spawn.Value("q", 0) for _ in range(writers)]
    published: multiprocessing.Queue[int] = spawn.Queue()
    results: multiprocessing.Queue[Outcome] = spawn.Queue()
    processes = [
        spawn.Process(target=publish_until, args=(prefix, stop, published, seed, start, progress[seed]))
        for seed in range(writers)
    ]
    processes += [
        spawn.Process(target=read_and_check, args=(prefix, 2.0, results), kwargs={"start": start})
        for _ in range(readers)
    ]
    for process in processes:
        process.start()
    try:
        outcomes = [results.get(timeout=120) for _ in range(readers)]
        wait_for(lambda: min(count.value for count in progress) > 10, timeout=60, what="every writer's versions")
        stop.set()
        counts = [published.get(timeout=30) for _ in range(writers)]
    finally:
        stop.set()
        for process in processes:
            process.join(10)
            _kill(process)
    return counts, outcomes


def test_readers_in_other_processes_never_see_a_torn_or_older_version(prefix: str) -> None:
    [versions], outcomes = _publish_under_readers(prefix, writers=1, readers=3)
    assert versions > 20
    for reads, torn, regressions, seen in outcomes:
        assert torn == 0
        assert regressions == 0
        assert reads > 100
        assert seen > 5


def test_writers_in_two_processes_take_turns_and_never_tear_a_version(prefix: str) -> None:
    counts, [(reads, torn, _, seen)] = _publish_under_readers(prefix, writers=2, readers=1)
    assert torn == 0
    assert min(counts) > 10
    assert reads > 100 and seen > 5


def test_a_reader_killed_while_reading_neither_blocks_the_writer_nor_corrupts_live_readers(
    prefix: str,
) -> None:
    writer = Synchronizer(prefix, slots=2)
    writer.write(b"v1")  # data_1
    doomed, _, _ = _start_holder(prefix)
    survivor, let_go, let_go_done = _start_holder(prefix)  # both pin data_1; every slot is now taken
    with pytest.raises(TooManyReaders):
        Synchronizer(prefix).read().__enter__()

    os.kill(doomed.pid or 0, signal.SIGKILL)
    doomed.join(10)
    writer.write(b"v2")  # data_0: nobody pins it

    # The survivor's pin on data_1 still counts: the crash did not reset it.
    with pytest.raises(ReadersStillActive):
        writer.write(b"v3", grace=0.1)

    let_go.set()
    assert let_go_done.wait(30)
    try:
        # Only the dead reader's pin is left on data_1, and it does not delay the writer at all.
        writer.write(b"v3", grace=0)
        with Synchronizer(prefix).read() as data:  # takes the dead reader's slot
            assert bytes(data) == b"v3"
        writer.write(b"v4", grace=0)
        writer.write(b"v5", grace=0)
    finally:
        _kill(survivor)
    with Synchronizer(prefix).read() as data:
        assert bytes(data) == b"v5"


def test_a_forked_child_reads_through_its_own_slot_not_its_parents(prefix: str) -> None:
    sync = Synchronizer(prefix)
    sync.write(b"parent's version")
    seen: multiprocessing.Queue[bytes] = fork.Queue()

    def child() -> None:
        with sync.read() as data:
            seen.put(bytes(data))
        sync.close()

    with sync.read() as held:
        process = fork.Process(target=child)
        process.start()
        assert seen.get(timeout=30) == b"parent's version"
        process.join(10)
        assert process.exitcode == 0
        # Had the child used and released the parent's slot, the parent's pin would be gone.
        sync.write(b"next")
        with pytest.raises(ReadersStillActive):
            sync.write(b"would overwrite the held version", grace=0.1)
        assert bytes(held) == b"parent's version"
