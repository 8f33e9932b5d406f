"""A local bucket on a real full disk (a small tmpfs mounted for the test): the put that does not
fit is refused as StorageFull and leaves no row; deleting objects gives the space back."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import conveyor

DISK = "4m"
OBJECT = b"x" * (512 * 1024)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(mount_point)], check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "--lazy", str(mount_point)], check=True)


def test_a_put_on_a_full_disk_is_refused_and_the_space_comes_back(small_disk: Path, tmp_path: Path) -> None:
    with conveyor.connect(f"sqlite://{tmp_path / 'data'}") as cv:
        b = cv.create_bucket("small", url=(small_disk / "bucket").as_uri())
        stored: list[str] = []
        with pytest.raises(conveyor.StorageFull, match="full") as caught:
            for i in range(100):
                b.put(f"k{i}", OBJECT)
                stored.append(f"k{i}")
        assert caught.value.code == conveyor.StorageFull.code
        assert stored and len(stored) < 100
        failed = f"k{len(stored)}"
        assert not b.exists(failed)
        assert [o.key for o in b.list()] == sorted(stored)
        assert all(b.get(key).bytes() == OBJECT for key in stored)
        b.delete(stored[:2])
        b.put(failed, OBJECT)
        assert b.get(failed).bytes() == OBJECT
