"""Storage that cannot be written: refused with StorageError naming the path, data left intact.

The tests run as root, which ignores permission bits. ``restricted_client.py`` therefore runs the
client in a process without the capabilities that bypass them (see its docstring), and every test
checks that the process really lacked CAP_DAC_OVERRIDE, so a pass is never a permission check that
did not happen. A data directory below a regular file fails for root too, in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import conveyor

from .seeded_storage import SeededDirectory, assert_all_stored, stored_numbers

RESTRICTED_CLIENT = Path(__file__).with_name("restricted_client.py")


def run_restricted(data_dir: Path, action: str) -> dict[str, Any]:
    """Run ``action`` on ``data_dir`` in a process that the permission bits apply to."""
    done = subprocess.run(
        [sys.executable, str(RESTRICTED_CLIENT), str(data_dir), action],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    outcome: dict[str, Any] = json.loads(done.stdout)
    assert outcome["dac_override"] is False, "the restricted client still bypasses permission bits"
    return outcome


def test_data_directory_below_a_regular_file_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a regular file where a directory should be")

    with pytest.raises(conveyor.StorageError, match="cannot create the data directory") as raised:
        conveyor.connect(f"sqlite://{blocker / 'data'}")
    assert str(blocker / "data") in str(raised.value)
    assert blocker.read_text() == "a regular file where a directory should be"


def test_directory_where_the_catalog_file_should_be_is_refused(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    (data_dir / "catalog.db").mkdir(parents=True)

    with pytest.raises(conveyor.StorageError, match="unable to open database file") as raised:
        conveyor.connect(f"sqlite://{data_dir}")
    assert str(data_dir / "catalog.db") in str(raised.value)
    assert list((data_dir / "catalog.db").iterdir()) == []


def test_data_directory_in_a_read_only_parent_is_refused(tmp_path: Path) -> None:
    parent = tmp_path / "read-only"
    parent.mkdir(mode=0o500)

    outcome = run_restricted(parent / "data", "open")

    assert outcome["error"] == "StorageError"
    assert f"cannot create the data directory {parent / 'data'}" in outcome["message"]
    assert list(parent.iterdir()) == []


def test_read_only_data_directory_is_refused_and_left_intact(seeded: SeededDirectory) -> None:
    before = seeded.files()
    seeded.data_dir.chmod(0o500)
    try:
        outcome = run_restricted(seeded.data_dir, "send:kept")
    finally:
        seeded.data_dir.chmod(0o755)

    assert outcome["error"] == "StorageError"
    assert f"the data directory {seeded.data_dir} is not writable" in outcome["message"]
    assert seeded.files() == before
    assert_all_stored(seeded)


def test_read_only_shard_file_refuses_sends_naming_it_and_stores_nothing(seeded: SeededDirectory) -> None:
    shard = seeded.shard(seeded.kept_id)
    before = shard.read_bytes()
    shard.chmod(0o444)
    try:
        outcome = run_restricted(seeded.data_dir, "send:kept")
    finally:
        shard.chmod(0o644)

    assert outcome["error"] == "StorageError"
    assert f"cannot write {shard}" in outcome["message"]
    assert "readonly" in outcome["message"]
    assert shard.read_bytes() == before
    assert_all_stored(seeded)


def test_read_only_catalog_refuses_new_queues_naming_it(seeded: SeededDirectory) -> None:
    seeded.catalog.chmod(0o444)
    try:
        outcome = run_restricted(seeded.data_dir, "create:newcomer")
    finally:
        seeded.catalog.chmod(0o644)

    assert outcome["error"] == "StorageError"
    assert f"cannot write {seeded.catalog}" in outcome["message"]
    with conveyor.connect(seeded.url) as cv:
        assert [q.queue_name for q in cv.list_queues()] == ["kept", "victim"]
    assert_all_stored(seeded)


def test_unwritable_shards_directory_is_refused_and_left_intact(seeded: SeededDirectory) -> None:
    shards = seeded.data_dir / "shards"
    names = sorted(os.listdir(shards))
    shards.chmod(0o500)
    try:
        outcome = run_restricted(seeded.data_dir, "send:kept")
    finally:
        shards.chmod(0o755)

    assert outcome["error"] == "StorageError"
    assert f"the data directory {shards} is not writable" in outcome["message"]
    assert sorted(os.listdir(shards)) == names
    assert_all_stored(seeded)


def test_read_only_catalog_snapshot_falls_back_to_the_catalog(seeded: SeededDirectory) -> None:
    """The snapshot is a cache of catalog.db: when it cannot be written, sends and catalog changes
    still work, read from and written to catalog.db."""
    snapshot = seeded.data_dir / "snapshot"
    files = [p for p in snapshot.iterdir() if p.is_file()]
    for path in files:
        path.chmod(0o444)
    snapshot.chmod(0o500)
    try:
        sent = run_restricted(seeded.data_dir, "send:kept")
        created = run_restricted(seeded.data_dir, "create:newcomer")
    finally:
        snapshot.chmod(0o755)
        for path in files:
            path.chmod(0o644)

    assert (sent["error"], created["error"]) == (None, None)
    with conveyor.connect(seeded.url) as cv:
        assert stored_numbers(cv, "kept") == [*range(-10, 0), *range(100)]
        assert stored_numbers(cv, "newcomer") == [-1]
        assert stored_numbers(cv, "victim") == list(range(100))
