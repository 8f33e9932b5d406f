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
from conveyor.storage import InvalidObjectKey, ObjectNotFound
from conveyor.storage.facade import storage_of
from conveyor.storage.service import INLINE_LIMIT
from tests.storage.deployments import deployment_client
from tests.storage.s3_server import S3Server


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


def test_get_nowait_reads_a_small_object_from_its_row_and_leaves_a_file_to_get(cv: conveyor.Conveyor) -> None:
    b = cv.create_bucket("mirror")
    small = os.urandom(INLINE_LIMIT)
    b.put("small.js", small, content_type="application/javascript")
    b.put("large.js", b"L" * (INLINE_LIMIT + 1))
    b.put("empty.js", b"")
    got = b.get_nowait("small.js")
    assert got is not None and got.bytes() == small and got.info == b.head("small.js")
    empty = b.get_nowait("empty.js")
    assert empty is not None and empty.bytes() == b""
    assert b.get_nowait("large.js") is None  # a file: get() reads it, on a thread in async code
    with pytest.raises(ObjectNotFound, match=r"missing\.js"):
        b.get_nowait("missing.js")
    with pytest.raises(InvalidObjectKey):
        b.get_nowait("../escape")


def test_get_nowait_waits_for_nothing_so_it_says_none_where_a_read_would(
    cv: conveyor.Conveyor, s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = cv.create_bucket(
        "remote",
        url=f"s3://{s3_server.new_bucket()}/conveyor",
        endpoint=s3_server.endpoint,
        region="us-east-1",
        access_key_id=s3_server.access_key_id,
        secret_access_key=s3_server.secret_access_key,
    )
    remote.put("small.js", b"tiny")
    assert remote.get_nowait("small.js") is None  # its bytes are in S3
    cv.create_bucket("local").put("small.js", b"tiny")
    with conveyor.connect(cv.url) as other:  # a bucket this process has not opened by a read yet
        fresh = other.bucket("local")
        assert fresh.get_nowait("small.js") is None
        assert fresh.get("small.js").bytes() == b"tiny"
        body = fresh.get_nowait("small.js")
        assert body is not None and body.bytes() == b"tiny"
    with deployment_client("postgres", tmp_path, monkeypatch) as pg:  # every catalog read a round trip
        shared = pg.create_bucket("shared", url=(tmp_path / "shared" / "b").as_uri())
        shared.put("small.js", b"tiny")
        assert shared.get("small.js").bytes() == b"tiny"
        assert shared.get_nowait("small.js") is None
