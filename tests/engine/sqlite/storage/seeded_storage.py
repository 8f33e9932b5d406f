"""A data directory holding known messages, for tests that damage part of it and check the rest."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import conveyor
from conveyor.codec import decode

MESSAGES_PER_QUEUE = 100
# Padding makes the damaged queue's shard span many pages, so truncating or garbling it hits data.
PADDING = "p" * 2000


@dataclass(frozen=True)
class SeededDirectory:
    """A closed data directory with queue ``kept`` (left alone) and ``victim`` (to be damaged)."""

    data_dir: Path
    kept_id: str
    victim_id: str

    @property
    def url(self) -> str:
        return f"sqlite://{self.data_dir}"

    @property
    def catalog(self) -> Path:
        return self.data_dir / "catalog.db"

    def shard(self, queue_id: str) -> Path:
        return self.data_dir / "shards" / f"{queue_id}.0.db"

    def files(self) -> dict[Path, bytes]:
        """Every file of the directory and its bytes, to show a failure wrote nothing."""
        return {p: p.read_bytes() for p in sorted(self.data_dir.rglob("*")) if p.is_file()}


def seed(data_dir: Path) -> SeededDirectory:
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        kept = cv.create_queue("kept")
        victim = cv.create_queue("victim")
        kept.send_batch([{"body": {"n": i}} for i in range(MESSAGES_PER_QUEUE)])
        victim.send_batch([{"body": {"n": i, "padding": PADDING}} for i in range(MESSAGES_PER_QUEUE)])
        return SeededDirectory(data_dir, kept.id, victim.id)


def stored_numbers(cv: conveyor.Conveyor, queue: str) -> list[int]:
    """The ``n`` of every message stored in ``queue``, sorted (read without leasing)."""
    stored = cv.engine.peek(cv.queue(queue).id, 1_000_000)
    return sorted(int(decode(m.body, m.content_type)["n"]) for m in stored)


def assert_all_stored(seeded: SeededDirectory) -> None:
    """Both queues hold exactly the messages :func:`seed` stored: nothing lost, nothing added."""
    with conveyor.connect(seeded.url) as cv:
        assert stored_numbers(cv, "kept") == list(range(MESSAGES_PER_QUEUE))
        assert stored_numbers(cv, "victim") == list(range(MESSAGES_PER_QUEUE))
