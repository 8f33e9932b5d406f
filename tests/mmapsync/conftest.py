"""Fixtures for mmapsync: every data set lives once on tmpfs and once on disk."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

TMPFS = Path("/dev/shm")


@pytest.fixture(params=["tmpfs", "disk"])
def prefix(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh data set prefix on tmpfs (``/dev/shm``, where production puts it) or on disk."""
    if request.param == "disk":
        yield str(tmp_path / "dataset")
        return
    directory = Path(tempfile.mkdtemp(prefix="conveyor-mmapsync-", dir=TMPFS))
    try:
        yield str(directory / "dataset")
    finally:
        shutil.rmtree(directory)
