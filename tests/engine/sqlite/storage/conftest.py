"""Fixtures for the bad-storage tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from .seeded_storage import SeededDirectory, seed


@pytest.fixture
def seeded(data_dir: Path) -> SeededDirectory:
    """A data directory with 100 messages in queue ``kept`` and 100 in queue ``victim``."""
    return seed(data_dir)
