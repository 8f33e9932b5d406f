"""The KV stores of the embedded engines, driven by hand: expiry by the injectable clock, the purge
service, accounts kept apart, and data that outlives the store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conveyor.deployment import Deployment
from conveyor.storage.kv import KVStore, KVWrite, open_kv_store
from conveyor.storage.kv_errors import KVNamespaceExists, KVNamespaceNotFound
from tests.conformance.support import FakeClock
from tests.engine.postgres.support import ThrowawayEngine


@pytest.fixture(params=["sqlite", "postgres"])
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    if request.param == "sqlite":
        yield Deployment("sqlite", str(tmp_path / "data"))
        return
    engine = ThrowawayEngine()
    try:
        yield engine.deployment()
    finally:
        engine.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start_ms=1_800_000_000_000)


@pytest.fixture
def store(deployment: Deployment, clock: FakeClock) -> Iterator[KVStore]:
    opened = open_kv_store(deployment, clock)
    try:
        yield opened
    finally:
        opened.close()


def names(store: KVStore, account: str, namespace_id: str) -> list[str]:
    return [k.name for k in store.list(account, namespace_id).keys]


def test_an_expired_key_is_invisible_at_once(store: KVStore, clock: FakeClock) -> None:
    ns = store.create_namespace("local", "n")
    store.put("local", ns.id, KVWrite("ttl", b"v", expiration_ttl=60))
    store.put("local", ns.id, KVWrite("at", b"v", expiration=1_800_000_120))
    store.put("local", ns.id, KVWrite("forever", b"v"))
    clock.advance(59.999)
    assert names(store, "local", ns.id) == ["at", "forever", "ttl"]
    clock.advance(0.001)
    assert store.get("local", ns.id, "ttl") is None
    assert names(store, "local", ns.id) == ["at", "forever"]
    clock.advance(60)
    assert store.get_many("local", ns.id, ["at", "forever"])["at"] is None
    assert names(store, "local", ns.id) == ["forever"]


def test_the_purge_removes_only_expired_rows(store: KVStore, clock: FakeClock) -> None:
    ns = store.create_namespace("local", "n")
    store.put_many("local", ns.id, [KVWrite(f"k{i}", b"v", expiration_ttl=60 + i) for i in range(5)])
    store.put("local", ns.id, KVWrite("forever", b"v"))
    assert store.purge_expired() == 0
    clock.advance(62)
    assert store.purge_expired() == 3
    assert store.purge_expired() == 0
    assert names(store, "local", ns.id) == ["forever", "k3", "k4"]


def test_a_rewrite_without_expiration_makes_a_key_permanent(store: KVStore, clock: FakeClock) -> None:
    ns = store.create_namespace("local", "n")
    store.put("local", ns.id, KVWrite("k", b"1", expiration_ttl=60))
    store.put("local", ns.id, KVWrite("k", b"2"))
    clock.advance(3600)
    store.purge_expired()
    value = store.get("local", ns.id, "k")
    assert value is not None and value.data == b"2" and value.expiration is None


def test_accounts_do_not_see_each_others_namespaces(store: KVStore) -> None:
    mine = store.create_namespace("acct-a", "shared-title")
    theirs = store.create_namespace("acct-b", "shared-title")  # titles are unique per account only
    store.put("acct-a", mine.id, KVWrite("k", b"a"))
    assert [n.id for n in store.list_namespaces("acct-b")] == [theirs.id]
    for action in (
        lambda: store.get("acct-b", mine.id, "k"),
        lambda: store.put("acct-b", mine.id, KVWrite("k", b"b")),
        lambda: store.delete("acct-b", mine.id, "k"),
        lambda: store.list("acct-b", mine.id),
        lambda: store.rename_namespace("acct-b", mine.id, "x"),
        lambda: store.delete_namespace("acct-b", mine.id),
        lambda: store.get_namespace("acct-b", mine.id),
    ):
        with pytest.raises(KVNamespaceNotFound):
            action()
    value = store.get("acct-a", mine.id, "k")
    assert value is not None and value.data == b"a"
    assert store.get_namespace("acct-a", mine.id).title == "shared-title"


def test_rename_keeps_the_keys_and_refuses_a_taken_title(store: KVStore) -> None:
    a = store.create_namespace("local", "a")
    store.create_namespace("local", "b")
    store.put("local", a.id, KVWrite("k", b"v"))
    assert store.rename_namespace("local", a.id, "c").title == "c"
    assert store.find_namespace("local", "c").id == a.id
    with pytest.raises(KVNamespaceExists):
        store.rename_namespace("local", a.id, "b")
    assert names(store, "local", a.id) == ["k"]


def test_data_outlives_the_store(deployment: Deployment, clock: FakeClock) -> None:
    first = open_kv_store(deployment, clock)
    ns = first.create_namespace("local", "n")
    first.put("local", ns.id, KVWrite("k", b"v", "bytes", '{"m":1}'))
    first.close()
    again = open_kv_store(deployment, clock)
    try:
        value = again.get("local", ns.id, "k")
        assert value is not None and (value.data, value.metadata) == (b"v", {"m": 1})
    finally:
        again.close()
