"""The object API, the same over a local bucket and a real S3-compatible server, with the metadata
on SQLite and on PostgreSQL."""

from __future__ import annotations

import hashlib
import io

import pytest

import conveyor
from conveyor.storage import Bucket, InvalidObjectKey, InvalidObjectMetadata, ObjectExists, ObjectNotFound
from conveyor.storage import catalog as catalog_module
from conveyor.storage import service as service_module


def test_put_then_get_returns_the_bytes_and_the_metadata(bucket: Bucket) -> None:
    data = b"hello, objects"
    info = bucket.put("docs/a.txt", data, content_type="text/plain", metadata={"sri": "sha-x"})
    assert (info.key, info.size, info.sha256) == ("docs/a.txt", len(data), hashlib.sha256(data).hexdigest())
    assert info.etag and '"' not in info.etag
    body = bucket.get("docs/a.txt")
    assert body.bytes() == data
    assert body.info == info == bucket.head("docs/a.txt")
    assert (body.info.content_type, dict(body.info.metadata)) == ("text/plain", {"sri": "sha-x"})


def test_a_range_read_returns_only_that_range(bucket: Bucket) -> None:
    bucket.put("r", bytes(range(100)))
    assert bucket.get("r", range=(10, 20)).bytes() == bytes(range(10, 20))
    assert bucket.get("r", range=(90, 500)).bytes() == bytes(range(90, 100))
    assert bucket.get("r", range=(100, 200)).bytes() == b""
    assert bucket.get("r", range=(5, 5)).bytes() == b""


def test_reads_stream_in_chunks(bucket: Bucket) -> None:
    data = b"x" * (300 * 1024)
    bucket.put("s", data)
    chunks = list(bucket.get("s"))
    assert b"".join(chunks) == data


def test_an_empty_object_round_trips(bucket: Bucket) -> None:
    assert bucket.put("empty", b"").size == 0
    assert bucket.get("empty").bytes() == b""
    assert list(bucket.get("empty")) == []


def test_put_takes_a_binary_file_or_an_iterator(bucket: Bucket) -> None:
    assert bucket.put("f", io.BytesIO(b"from a file")).size == 11
    assert bucket.put("i", iter([b"from ", b"an ", b"iterator"])).size == 16
    assert bucket.get("f").bytes() == b"from a file"
    assert bucket.get("i").bytes() == b"from an iterator"


def test_large_objects_go_in_parts(bucket: Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service_module, "MULTIPART_THRESHOLD", 1 << 20)
    data = bytes(range(256)) * (6 * 4096)  # 6 MiB: over the threshold
    info = bucket.put("big.bin", io.BytesIO(data))
    assert (info.size, info.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert bucket.get("big.bin").bytes() == data


def test_only_if_absent_refuses_an_existing_key_and_changes_nothing(bucket: Bucket) -> None:
    first = bucket.put("immutable.js", b"v1", only_if_absent=True)
    with pytest.raises(ObjectExists) as caught:
        bucket.put("immutable.js", b"v2", only_if_absent=True)
    assert caught.value.code == ObjectExists.code
    assert bucket.get("immutable.js").bytes() == b"v1"
    assert bucket.head("immutable.js") == first


def test_an_overwrite_replaces_bytes_and_metadata(bucket: Bucket) -> None:
    bucket.put("k", b"one", content_type="text/plain", metadata={"a": "1"})
    info = bucket.put("k", b"two!", content_type="application/json")
    assert bucket.get("k").bytes() == b"two!"
    assert (info.size, info.content_type, dict(info.metadata)) == (4, "application/json", {})


def test_missing_objects_are_refused_by_name(bucket: Bucket) -> None:
    with pytest.raises(ObjectNotFound, match="nope"):
        bucket.get("nope")
    with pytest.raises(ObjectNotFound):
        bucket.head("nope")
    assert not bucket.exists("nope")


def test_delete_removes_the_object_and_counts_what_existed(bucket: Bucket) -> None:
    bucket.put("a", b"1")
    bucket.put("b", b"2")
    assert bucket.delete("a") == 1
    assert bucket.delete("a") == 0
    assert bucket.delete(["b", "missing"]) == 1
    assert list(bucket.list()) == []
    with pytest.raises(ObjectNotFound):
        bucket.get("a")


def test_copy_keeps_content_and_metadata(bucket: Bucket) -> None:
    original = bucket.put("src.txt", b"copied", content_type="text/plain", metadata={"m": "v"})
    copy = bucket.copy("src.txt", "dst.txt")
    assert (copy.key, copy.size, copy.sha256, copy.content_type) == ("dst.txt", 6, original.sha256, "text/plain")
    assert dict(copy.metadata) == {"m": "v"}
    assert bucket.get("dst.txt").bytes() == b"copied"
    with pytest.raises(ObjectNotFound):
        bucket.copy("missing", "x")


def test_list_by_prefix_and_start_after_in_byte_order(bucket: Bucket) -> None:
    for key in ["b/2", "a/1", "b/1", "c", "b/10", "é"]:
        bucket.put(key, key.encode())
    assert [o.key for o in bucket.list()] == ["a/1", "b/1", "b/10", "b/2", "c", "é"]
    assert [o.key for o in bucket.list(prefix="b/")] == ["b/1", "b/10", "b/2"]
    assert [o.key for o in bucket.list(start_after="b/10")] == ["b/2", "c", "é"]
    assert [o.key for o in bucket.list(prefix="b/", start_after="b/1")] == ["b/10", "b/2"]


def test_list_pages_lazily_through_the_engine(bucket: Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalog_module, "PAGE", 2)
    keys = [f"k{i}" for i in range(5)]
    for key in keys:
        bucket.put(key, b".")
    listing = bucket.list()
    assert next(listing).key == "k0"
    assert [o.key for o in listing] == keys[1:]


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("x" * 1025, "1025 bytes"),
        ("é" * 513, "1026 bytes"),
        ("a\x00b", "NUL"),
        ("", "empty"),
        ("/lead", "begins or ends"),
        ("trail/", "begins or ends"),
        ("a//b", "segment"),
        ("a/../b", "segment"),
        ("./a", "segment"),
    ],
)
def test_bad_keys_are_refused_and_nothing_is_written(bucket: Bucket, key: str, problem: str) -> None:
    with pytest.raises(InvalidObjectKey, match=problem) as caught:
        bucket.put(key, b"data")
    assert caught.value.code == InvalidObjectKey.code
    assert list(bucket.list()) == []


def test_a_key_of_exactly_1024_bytes_is_accepted(bucket: Bucket) -> None:
    key = "/".join(["k" * 200] * 5) + "/" + "k" * 19
    assert len(key) == 1024
    bucket.put(key, b"ok")
    assert bucket.get(key).bytes() == b"ok"


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"metadata": {"a": 1}}, "strings"),
        ({"metadata": {"a": "x" * 9000}}, "8192"),
        ({"content_type": "text/\nplain"}, "printable"),
    ],
)
def test_bad_metadata_is_refused(bucket: Bucket, kwargs: dict[str, object], problem: str) -> None:
    with pytest.raises(InvalidObjectMetadata, match=problem):
        bucket.put("k", b"data", **kwargs)  # type: ignore[arg-type]
    assert not bucket.exists("k")


def test_text_is_refused_with_advice(bucket: Bucket) -> None:
    with pytest.raises(InvalidObjectKey, match="encode text"):
        bucket.put("k", "text")  # type: ignore[arg-type]


def test_a_bad_range_is_refused(bucket: Bucket) -> None:
    bucket.put("k", b"data")
    with pytest.raises(InvalidObjectKey, match="range"):
        bucket.get("k", range=(5, 2))


def test_a_bucket_reopened_by_a_new_client_sees_its_objects(cv: conveyor.Conveyor, bucket: Bucket) -> None:
    bucket.put("kept", b"still here", content_type="text/plain")
    again = conveyor.Conveyor(cv.engine, cv.url)  # a second client on the same deployment
    b = again.bucket(bucket.name)
    assert b.get("kept").bytes() == b"still here"
    assert b.head("kept").content_type == "text/plain"
    for component in again._components.values():
        component.close()


def test_a_local_key_segment_longer_than_a_file_name_is_refused_clearly(cv: conveyor.Conveyor, tmp_path) -> None:
    from tests.storage.conftest import make_bucket

    local = make_bucket(cv, "local", "long-names", tmp_path, None)
    with pytest.raises(InvalidObjectKey, match="255 bytes"):
        local.put("d/" + "x" * 256, b"data")
    assert list(local.list()) == []


@pytest.mark.parametrize("prefix", ["", "a", "ab", "b/", "é", "\U0010ffff", "a\U0010ffff"])
def test_prefix_listing_finds_exactly_the_keys_with_the_prefix(cv: conveyor.Conveyor, tmp_path, prefix: str) -> None:
    from tests.storage.conftest import make_bucket

    b = make_bucket(cv, "local", "prefixes", tmp_path, None)
    keys = ["a", "ab", "abc", "b/x", "b/y", "é", "éa", "f", "\U0010ffff", "a\U0010ffff", "a\U0010ffffz", "c0"]
    for key in keys:
        b.put(key, b".")
    expected = sorted((k for k in keys if k.startswith(prefix)), key=lambda k: k.encode())
    assert [o.key for o in b.list(prefix=prefix)] == expected


def test_a_local_key_cannot_be_both_a_file_and_a_directory(cv: conveyor.Conveyor, tmp_path) -> None:
    from tests.storage.conftest import make_bucket

    b = make_bucket(cv, "local", "nested", tmp_path, None)
    b.put("a", b"file")
    with pytest.raises(InvalidObjectKey, match="'a' is an object"):
        b.put("a/b", b"under a file")
    b.put("d/e", b"in a directory")
    with pytest.raises(InvalidObjectKey, match="'d' holds other objects"):
        b.put("d", b"over a directory")
    assert [o.key for o in b.list()] == ["a", "d/e"]


def test_a_local_key_whose_keys_below_were_all_deleted_is_an_object_again(cv: conveyor.Conveyor, tmp_path) -> None:
    from tests.storage.conftest import make_bucket

    b = make_bucket(cv, "local", "emptied", tmp_path, None)
    b.put("d/e/f", b"deep")
    b.put("d/g", b"beside")
    b.delete("d/e/f")
    with pytest.raises(InvalidObjectKey, match="'d' holds other objects"):
        b.put("d", b"over a directory that still holds d/g")
    b.delete("d/g")
    b.put("d", b"where only empty directories were")
    assert b.get("d").bytes() == b"where only empty directories were"
    assert [o.key for o in b.list()] == ["d"]
