"""A shard file deleted behind Conveyor's back is reported, never silently remade empty."""

from __future__ import annotations

from pathlib import Path

import pytest

import conveyor


def test_a_deleted_shard_file_is_refused_not_recreated(data_dir: Path) -> None:
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        q = cv.create_queue("precious")
        q.send_batch([{"body": n} for n in range(10)])
        queue_id = q.id
    shard = data_dir / "shards" / f"{queue_id}.0.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{shard}{suffix}").unlink(missing_ok=True)
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        with pytest.raises(conveyor.StorageError, match=r"shard file .* is missing"):
            cv.queue("precious").send("more", content_type="text")
        assert not shard.exists()


def test_shard_files_exist_as_soon_as_the_queue_does(data_dir: Path) -> None:
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        q = cv.create_queue("split", shards=3)
        assert sorted(p.name for p in (data_dir / "shards").glob(f"{q.id}.*.db")) == [
            f"{q.id}.{n}.db" for n in range(3)
        ]
