"""Bodies of the reader and writer processes the mmapsync tests start (importable by spawn)."""

from __future__ import annotations

import random
import time
import zlib
from multiprocessing.queues import Queue
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Barrier, Event

from conveyor.mmapsync import ReadersStillActive, Synchronizer


def framed(seq: int, rng: random.Random) -> bytes:
    """A payload that carries its own sequence number and CRC-32, so any tear is visible."""
    body = seq.to_bytes(8, "little") + rng.randbytes(rng.randrange(16, 64 * 1024))
    return body + zlib.crc32(body).to_bytes(4, "little")


def is_intact(data: memoryview) -> bool:
    """Whether a payload made by :func:`framed` reads back whole."""
    return zlib.crc32(data[:-4]) == int.from_bytes(data[-4:], "little")


def publish_until(
    prefix: str,
    stop: Event,
    published: Queue[int],
    seed: int = 1,
    start: Barrier | None = None,
    progress: Synchronized[int] | None = None,
) -> None:
    """Publish framed payloads back to back until ``stop`` (from ``start``'s release, if given, so that
    processes spawned at different speeds on a loaded machine all run at once); count each in
    ``progress`` and report how many went out."""
    sync = Synchronizer(prefix)
    rng = random.Random(seed)
    seq = 0
    if start is not None:
        start.wait()
    while not stop.is_set():
        try:
            sync.write(framed(seq + 1, rng), grace=0.5)
        except ReadersStillActive:
            continue
        seq += 1
        if progress is not None:
            progress.value = seq
    published.put(seq)


def read_and_check(
    prefix: str,
    seconds: float,
    results: Queue[tuple[int, int, int, int]],
    *,
    min_reads: int = 101,
    min_seen: int = 6,
    limit: float = 60.0,
    start: Barrier | None = None,
) -> None:
    """Read for ``seconds``, and on until ``min_reads`` reads saw ``min_seen`` versions (a writer
    started late on a loaded machine) or ``limit`` seconds passed; report (reads, torn reads,
    sequence regressions, versions seen)."""
    sync = Synchronizer(prefix)
    if start is not None:
        start.wait()
    reads = torn = regressions = 0
    last = 0
    seen: set[int] = set()
    started = time.monotonic()
    while (now := time.monotonic() - started) < seconds or (
        (reads < min_reads or len(seen) < min_seen) and now < limit
    ):
        with sync.read() as data:
            intact = is_intact(data)
            seq = int.from_bytes(data[:8], "little")
        reads += 1
        torn += not intact
        regressions += seq < last
        last = max(last, seq)
        seen.add(seq)
    results.put((reads, torn, regressions, len(seen)))


def hold_read(prefix: str, holding: Event, release: Event, released: Event) -> None:
    """Take a read, say so, keep it until ``release`` (or until killed), say so; then idle, alive."""
    sync = Synchronizer(prefix)
    with sync.read():
        holding.set()
        release.wait(60)
    released.set()
    time.sleep(60)
