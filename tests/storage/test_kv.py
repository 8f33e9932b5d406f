"""KV namespaces through ``cv.kv(...)``, the same on every engine (SQLite, PostgreSQL, a server)."""

from __future__ import annotations

import pytest

import conveyor
from conveyor.errors import InvalidRequest
from conveyor.storage.kv_errors import (
    InvalidKVExpiration,
    InvalidKVKey,
    InvalidKVNamespaceTitle,
    KVMetadataTooLarge,
    KVNamespaceExists,
    KVNamespaceNotFound,
    KVValueTooLarge,
)
from conveyor.storage.kv_handle import KVNamespace
from tests.conformance.support import FakeClock
from tests.storage.kv_support import refused


@pytest.fixture
def kv(conveyor_client: conveyor.Conveyor) -> KVNamespace:
    return conveyor_client.create_kv_namespace("cdn-meta")


# -- namespaces ------------------------------------------------------------------------------------
def test_namespaces_are_created_listed_renamed_and_deleted(conveyor_client: conveyor.Conveyor) -> None:
    a = conveyor_client.create_kv_namespace("b-second")
    b = conveyor_client.create_kv_namespace("a-first")
    assert len(a.id) == 32 and all(c in "0123456789abcdef" for c in a.id)
    assert [n.title for n in conveyor_client.list_kv_namespaces()] == ["a-first", "b-second"]
    assert conveyor_client.kv("b-second").id == a.id
    assert conveyor_client.kv_by_id(b.id).title == "a-first"
    conveyor_client.delete_kv_namespace("a-first")
    assert [n.id for n in conveyor_client.list_kv_namespaces()] == [a.id]


def test_a_title_is_unique_in_the_account(conveyor_client: conveyor.Conveyor) -> None:
    conveyor_client.create_kv_namespace("cdn-meta")
    with pytest.raises(KVNamespaceExists) as caught:
        conveyor_client.create_kv_namespace("cdn-meta")
    assert caught.value.code == 10014 and "cdn-meta" in str(caught.value)
    assert len(conveyor_client.list_kv_namespaces()) == 1


def test_kv_raises_for_a_missing_namespace_unless_told_to_create_it(conveyor_client: conveyor.Conveyor) -> None:
    with pytest.raises(KVNamespaceNotFound) as caught:
        conveyor_client.kv("nope")
    assert caught.value.code == 10013
    created = conveyor_client.kv("nope", create=True)
    assert conveyor_client.kv("nope", create=True).id == created.id


@pytest.mark.parametrize("title", ["", "   ", "t" * 513])
def test_bad_titles_are_refused(conveyor_client: conveyor.Conveyor, title: str) -> None:
    with pytest.raises(InvalidKVNamespaceTitle) as caught:
        conveyor_client.create_kv_namespace(title)
    assert caught.value.code == 10019
    assert conveyor_client.list_kv_namespaces() == []


def test_a_malformed_or_unknown_namespace_id_is_not_found(conveyor_client: conveyor.Conveyor) -> None:
    for namespace_id in ("x" * 32, "0" * 32):
        with pytest.raises(KVNamespaceNotFound):
            conveyor_client.kv_by_id(namespace_id)


def test_deleting_a_namespace_deletes_its_keys(conveyor_client: conveyor.Conveyor, kv: KVNamespace) -> None:
    kv.put("a", "1")
    conveyor_client.delete_kv_namespace("cdn-meta")
    with pytest.raises(KVNamespaceNotFound):
        kv.get("a")
    again = conveyor_client.create_kv_namespace("cdn-meta")
    assert list(again.list()) == [] and again.get("a") is None


# -- values ----------------------------------------------------------------------------------------
def test_values_come_back_as_they_went_in(kv: KVNamespace) -> None:
    kv.put("text", "héllo")
    kv.put("bytes", b"\x00\xff")
    kv.put("json", {"latest": "3.7.1", "n": [1, 2.5, None]})
    kv.put("number", 42)
    assert kv.get("text") == "héllo"
    assert kv.get("bytes") == b"\x00\xff"
    assert kv.get("json") == {"latest": "3.7.1", "n": [1, 2.5, None]}
    assert kv.get("number") == 42
    assert kv.get("json", type="text") == '{"latest":"3.7.1","n":[1,2.5,null]}'
    assert kv.get("text", type="bytes") == "héllo".encode()


def test_a_missing_key_reads_as_none(kv: KVNamespace) -> None:
    assert kv.get("nope") is None
    assert kv.get_with_metadata("nope") == (None, None)


def test_put_replaces_value_metadata_and_expiration(kv: KVNamespace) -> None:
    kv.put("k", "one", metadata={"v": 1}, expiration_ttl=3600)
    assert kv.get_with_metadata("k") == ("one", {"v": 1})
    assert [k.expiration is not None for k in kv.list()] == [True]
    kv.put("k", "two")
    assert kv.get_with_metadata("k") == ("two", None)
    assert [(k.name, k.expiration, k.metadata) for k in kv.list()] == [("k", None, None)]


def test_delete_removes_a_key_and_a_missing_key_is_no_error(kv: KVNamespace) -> None:
    kv.put("k", "v")
    kv.delete("k")
    kv.delete("k")
    assert kv.get("k") is None


def test_bulk_put_get_and_delete(kv: KVNamespace) -> None:
    kv.put_many([{"key": f"k{i}", "value": i, "metadata": {"i": i}} for i in range(20)])
    assert kv.get_many(["k1", "k19", "nope"]) == {"k1": 1, "k19": 19, "nope": None}
    kv.delete_many([f"k{i}" for i in range(10)])
    assert [k.name for k in kv.list()] == sorted(f"k{i}" for i in range(10, 20))


def test_a_bulk_put_with_one_bad_entry_stores_nothing(kv: KVNamespace) -> None:
    kv.put("keep", "v")
    entries = [{"key": "a", "value": 1}, {"key": "b" * 513, "value": 2}]
    refused(kv, InvalidKVKey, 10020, kv.put_many, entries)
    refused(kv, InvalidRequest, 10207, kv.put_many, [{"key": "a", "value": 1, "colour": "red"}])


def test_writes_are_read_by_another_client(kv: KVNamespace, second_client: conveyor.Conveyor) -> None:
    kv.put("k", {"v": 1}, metadata="m")
    assert second_client.kv("cdn-meta").get_with_metadata("k") == ({"v": 1}, "m")


# -- listing ---------------------------------------------------------------------------------------
def test_keys_list_in_byte_order_with_prefix(kv: KVNamespace) -> None:
    names = ["b", "a", "ab", "a/é", "a/z", "a/\U0001f600", "A", "jquery", "jq"]
    for name in names:
        kv.put(name, "v")
    assert [k.name for k in kv.list()] == sorted(names, key=lambda n: n.encode())
    assert [k.name for k in kv.list(prefix="a/")] == ["a/z", "a/é", "a/\U0001f600"]
    assert [k.name for k in kv.list(prefix="j")] == ["jq", "jquery"]
    assert list(kv.list(prefix="zz")) == []


def test_list_pages_with_an_opaque_cursor(kv: KVNamespace) -> None:
    kv.put_many([{"key": f"k{i:02}", "value": i} for i in range(25)])
    first = kv.list_page(limit=10)
    assert [k.name for k in first.keys] == [f"k{i:02}" for i in range(10)]
    assert not first.list_complete and first.cursor
    second = kv.list_page(limit=10, cursor=first.cursor)
    assert [k.name for k in second.keys] == [f"k{i:02}" for i in range(10, 20)]
    last = kv.list_page(limit=10, cursor=second.cursor)
    assert len(last.keys) == 5 and last.list_complete and last.cursor == ""
    assert [k.name for k in kv.list(limit=10)] == [f"k{i:02}" for i in range(25)]


def test_list_shows_expiration_and_metadata(kv: KVNamespace) -> None:
    kv.put("k", "v", metadata={"sri": "x"}, expiration=2_000_000_000)
    assert [(k.name, k.expiration, k.metadata) for k in kv.list()] == [("k", 2_000_000_000, {"sri": "x"})]


@pytest.mark.parametrize("limit", [0, 9, 1001])
def test_a_list_limit_outside_10_to_1000_is_refused(kv: KVNamespace, limit: int) -> None:
    with pytest.raises(InvalidRequest, match="10 to 1000"):
        kv.list_page(limit=limit)


def test_a_forged_cursor_is_refused(kv: KVNamespace) -> None:
    with pytest.raises(InvalidRequest, match="cursor"):
        kv.list_page(cursor="!!not-base64!!")


# -- limits ----------------------------------------------------------------------------------------
def test_keys_up_to_512_bytes_are_taken_and_longer_ones_refused(kv: KVNamespace) -> None:
    kv.put("é" * 256, "v")  # 512 bytes of UTF-8
    assert kv.get("é" * 256) == "v"
    text = refused(kv, InvalidKVKey, 10020, kv.put, "é" * 256 + "x", "v")
    assert "513 bytes" in text and "512" in text
    refused(kv, InvalidKVKey, 10020, kv.put, "", "v")
    refused(kv, InvalidKVKey, 10020, kv.put, "..", "v")
    with pytest.raises(InvalidKVKey):
        kv.get("k" * 513)


def test_values_over_25_mib_are_refused(kv: KVNamespace) -> None:
    text = refused(kv, KVValueTooLarge, 10011, kv.put, "big", b"x" * (25 * 1024 * 1024 + 1))
    assert "26214401 bytes" in text and "25 MiB" in text


def test_metadata_up_to_1024_bytes_is_taken_and_more_refused(kv: KVNamespace) -> None:
    kv.put("k", "v", metadata="m" * 1022)  # 1024 bytes with its quotes
    text = refused(kv, KVMetadataTooLarge, 10023, kv.put, "k", "v", metadata="m" * 1023)
    assert "1025 bytes" in text and "1024" in text
    refused(kv, KVMetadataTooLarge, 10023, kv.put, "k", "v", metadata={1, 2})


def test_expirations_closer_than_60_seconds_are_refused(kv: KVNamespace) -> None:
    text = refused(kv, InvalidKVExpiration, 10033, kv.put, "k", "v", expiration_ttl=59)
    assert "at least 60" in text
    refused(kv, InvalidKVExpiration, 10033, kv.put, "k", "v", expiration=1_000_000_000)
    refused(kv, InvalidKVExpiration, 10033, kv.put, "k", "v", expiration_ttl=60.5)


def test_values_json_cannot_hold_are_refused(kv: KVNamespace) -> None:
    refused(kv, InvalidRequest, 10207, kv.put, "k", object())
    refused(kv, InvalidRequest, 10207, kv.put, "k", float("nan"))


# -- expiry ----------------------------------------------------------------------------------------
def test_an_expired_key_is_invisible_at_once_by_the_engines_clock(conveyor_client: conveyor.Conveyor) -> None:
    clock = FakeClock(start_ms=1_800_000_000_000)
    conveyor_client.engine.clock = clock  # before the KV store opens: it reads time from this clock
    kv = conveyor_client.create_kv_namespace("n")
    kv.put("ttl", "v", expiration_ttl=60)
    kv.put("at", "v", expiration=1_800_000_090)
    kv.put("forever", "v")
    clock.advance(59.999)
    assert kv.get("ttl") == "v"
    clock.advance(0.001)
    assert kv.get("ttl") is None and kv.get_with_metadata("ttl") == (None, None)
    assert [k.name for k in kv.list()] == ["at", "forever"]
    clock.advance(30)
    assert [k.name for k in kv.list()] == ["forever"]
    assert kv.get_many(["at", "forever"]) == {"at": None, "forever": "v"}
