"""A small object of a local bucket keeps its bytes in its catalog row (storage.db) instead of a
file: one flushed commit stores it, one read returns it, and it behaves as every other object."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

import conveyor
from conveyor.storage import InvalidObjectKey
from conveyor.storage.facade import storage_of
from conveyor.storage.service import INLINE_LIMIT


@pytest.fixture
def cv(tmp_path: Path) -> Iterator[conveyor.Conveyor]:
    with conveyor.connect(f"sqlite://{tmp_path / 'data'}") as cv:
        yield cv


def _files(cv: conveyor.Conveyor, bucket: str) -> list[str]:
    root = Path(cv.deployment.location) / "buckets" / cv.deployment.account / bucket
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_a_small_object_is_kept_in_its_row_and_read_back_whole_in_ranges_and_streamed(cv: conveyor.Conveyor) -> None:
    b = cv.create_bucket("small")
    data = os.urandom(INLINE_LIMIT)
    info = b.put("a/b.bin", data, content_type="application/octet-stream", metadata={"k": "v"})
    assert _files(cv, "small") == []
    got = b.get("a/b.bin")
    assert got.bytes() == data and got.info == info == b.head("a/b.bin")
    assert b"".join(b.get("a/b.bin")) == data
    assert b.get("a/b.bin", range=(10, 20)).bytes() == data[10:20]
    assert b.get("a/b.bin", range=(INLINE_LIMIT - 5, INLINE_LIMIT + 100)).bytes() == data[-5:]
    assert b.get("a/b.bin", range=(5, 5)).bytes() == b""
    assert info.size == INLINE_LIMIT and info.metadata == {"k": "v"}
    import hashlib

    assert info.sha256 == hashlib.sha256(data).hexdigest() and info.etag == info.sha256[:32]
    assert b.put("empty", b"").size == 0 and b.get("empty").bytes() == b"" and _files(cv, "small") == []
    assert b.put("streamed", iter([b"one ", b"two"])).size == 7 and b.get("streamed").bytes() == b"one two"


def test_one_byte_over_the_limit_is_a_file_and_overwrites_move_the_bytes_between_file_and_row(
    cv: conveyor.Conveyor,
) -> None:
    b = cv.create_bucket("moves")
    large = b"L" * (INLINE_LIMIT + 1)
    b.put("k", large)
    assert _files(cv, "moves") == ["k"]
    b.put("k", b"small now")  # the row takes the bytes and the file goes
    assert _files(cv, "moves") == [] and b.get("k").bytes() == b"small now"
    b.put("k", large)
    assert _files(cv, "moves") == ["k"] and b.get("k").bytes() == large
    assert [o.key for o in b.list()] == ["k"]


def test_copies_and_deletes_of_small_objects_touch_no_file(cv: conveyor.Conveyor) -> None:
    b = cv.create_bucket("copies")
    b.put("src", b"small", content_type="text/plain", metadata={"m": "1"})
    copied = b.copy("src", "dst")
    assert copied.key == "dst" and copied.content_type == "text/plain" and copied.metadata == {"m": "1"}
    assert b.get("dst").bytes() == b"small" and _files(cv, "copies") == []
    b.put("big", b"B" * (INLINE_LIMIT * 2))
    b.copy("big", "dst")  # a file's copy over a small object: the destination becomes a file
    assert b.get("dst").bytes() == b"B" * (INLINE_LIMIT * 2) and _files(cv, "copies") == ["big", "dst"]
    b.copy("src", "dst")  # and back: the row holds the bytes, the file is deleted
    assert b.get("dst").bytes() == b"small" and _files(cv, "copies") == ["big"]
    assert b.delete(["src", "dst", "missing"]) == 2
    assert [o.key for o in b.list()] == ["big"]


def test_a_key_and_the_keys_below_it_clash_whether_their_bytes_are_rows_or_files(cv: conveyor.Conveyor) -> None:
    b = cv.create_bucket("clashes")
    b.put("a", b"small")
    with pytest.raises(InvalidObjectKey, match="'a' is an object"):
        b.put("a/b", b"L" * (INLINE_LIMIT + 1))
    with pytest.raises(InvalidObjectKey, match="'a' is an object"):
        b.put("a/b/c", b"small too")
    b.put("d/e", b"L" * (INLINE_LIMIT + 1))
    with pytest.raises(InvalidObjectKey, match="'d' holds other objects"):
        b.put("d", b"small")
    with pytest.raises(InvalidObjectKey, match="holds other objects"):
        b.copy("a", "d")
    with pytest.raises(InvalidObjectKey, match="255 bytes"):
        b.put("x" * 256, b"small")
    assert [o.key for o in b.list()] == ["a", "d/e"] and _files(cv, "clashes") == ["d/e"]


def test_the_orphan_sweep_deletes_a_file_a_small_object_replaced(cv: conveyor.Conveyor) -> None:
    """A crash between the small put's commit and its deletion of the old file leaves the file."""
    b = cv.create_bucket("sweep")
    b.put("k", b"small")
    root = Path(cv.deployment.location) / "buckets" / cv.deployment.account / "sweep"
    (root / "k").write_bytes(b"the old, larger version")
    old = time.time() - 7200
    os.utime(root / "k", (old, old))
    assert storage_of(cv).sweep_orphans() == 1
    assert _files(cv, "sweep") == [] and b.get("k").bytes() == b"small"


def test_a_version_1_catalog_is_upgraded_in_place_and_its_objects_stay_files(tmp_path: Path) -> None:
    directory = tmp_path / "data"
    with conveyor.connect(f"sqlite://{directory}") as cv:
        cv.create_bucket("old").put("k", b"L" * (INLINE_LIMIT + 1), content_type="text/plain")
    with sqlite3.connect(directory / "storage.db") as conn:  # back to what version 1 stored
        conn.execute("ALTER TABLE storage_objects DROP COLUMN data")
        conn.execute("PRAGMA user_version = 1")
    conn.close()
    version_1 = resources.files("conveyor.storage").joinpath("storage_sqlite.sql").read_text()
    assert "data         BLOB" in version_1  # the column the upgrade adds back
    with conveyor.connect(f"sqlite://{directory}") as cv:
        b = cv.bucket("old")
        assert b.get("k").bytes() == b"L" * (INLINE_LIMIT + 1) and b.head("k").content_type == "text/plain"
        b.put("small", b"now in a row")
        assert b.get("small").bytes() == b"now in a row" and _files(cv, "old") == ["k"]
    with sqlite3.connect(directory / "storage.db") as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    conn.close()
