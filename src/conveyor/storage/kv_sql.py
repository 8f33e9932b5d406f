"""The KV store's logic on a SQL database, shared by SQLite (``kv_sqlite.py``) and PostgreSQL
(``kv_postgres.py``): each backend gives its named queries (``kv_sqlite.sql``, ``kv_postgres.sql``,
the same names) and how to run them in a transaction."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from conveyor.errors import InvalidRequest
from conveyor.storage.kv import (
    MAX_BULK_GET,
    MAX_BULK_WRITE,
    Kind,
    KVKey,
    KVKeyPage,
    KVNamespaceInfo,
    KVStore,
    KVValue,
    KVWrite,
    check_count,
    check_key,
    check_list_limit,
    check_namespace_id,
    check_title,
    decode_cursor,
    encode_cursor,
    metadata_of,
    new_namespace_id,
)
from conveyor.storage.kv_errors import KVNamespaceExists, KVNamespaceNotFound

T = TypeVar("T")
Row = tuple[Any, ...]
# Runs one named query with its parameters; returns the rows it gives.
Run = Callable[[str, dict[str, Any]], list[Row]]
# How many expired rows one purge transaction removes, so a purge never holds the writer long.
PURGE_BATCH = 1000


def prefix_end(prefix: str) -> str | None:
    """The least string after every string starting with ``prefix`` (``None``: there is none), so a
    prefix is an index range ``prefix <= key < end`` in code-point (UTF-8 byte) order."""
    chars = list(prefix)
    while chars:
        point = ord(chars[-1]) + 1
        if point == 0xD800:
            point = 0xE000  # skip the surrogates, which no key holds
        if point <= 0x10FFFF:
            chars[-1] = chr(point)
            return "".join(chars)
        chars.pop()
    return None


class SQLKVStore(KVStore):
    """:class:`KVStore` over named queries; subclasses run them."""

    @abstractmethod
    def _read(self, fn: Callable[[Run], T]) -> T:
        """``fn`` on a connection that reads the latest commits."""

    @abstractmethod
    def _write(self, fn: Callable[[Run], T]) -> T:
        """``fn`` in one write transaction, committed durably before this returns."""

    @abstractmethod
    def _is_title_taken(self, exc: Exception) -> bool:
        """Whether ``exc`` is the unique violation of (account, title): a race with another creator."""

    def _now_s(self) -> int:
        return self.clock.now_ms() // 1000

    # -- namespaces --------------------------------------------------------------------------
    def create_namespace(self, account: str, title: str) -> KVNamespaceInfo:
        check_title(title)
        info = KVNamespaceInfo(new_namespace_id(), title)

        def create(run: Run) -> None:
            if run("find_namespace", {"account": account, "title": title}):
                raise _title_taken(title)
            run("insert_namespace", {"id": info.id, "account": account, "title": title, "now_ms": self.clock.now_ms()})

        self._write_titled(create, title)
        return info

    def _write_titled(self, fn: Callable[[Run], T], title: str) -> T:
        try:
            return self._write(fn)
        except Exception as exc:
            if self._is_title_taken(exc):
                raise _title_taken(title) from None
            raise

    def list_namespaces(self, account: str) -> list[KVNamespaceInfo]:
        rows = self._read(lambda run: run("list_namespaces", {"account": account}))
        return [KVNamespaceInfo(id, title) for id, title in rows]

    def get_namespace(self, account: str, namespace_id: str) -> KVNamespaceInfo:
        check_namespace_id(namespace_id)
        rows = self._read(lambda run: run("get_namespace", {"account": account, "id": namespace_id}))
        if not rows:
            raise _not_found(namespace_id)
        return KVNamespaceInfo(rows[0][0], rows[0][1])

    def find_namespace(self, account: str, title: str) -> KVNamespaceInfo:
        check_title(title)
        rows = self._read(lambda run: run("find_namespace", {"account": account, "title": title}))
        if not rows:
            raise KVNamespaceNotFound(f"there is no KV namespace titled {title!r}")
        return KVNamespaceInfo(rows[0][0], rows[0][1])

    def rename_namespace(self, account: str, namespace_id: str, title: str) -> KVNamespaceInfo:
        check_namespace_id(namespace_id)
        check_title(title)

        def rename(run: Run) -> None:
            _require(run, account, namespace_id)
            taken = run("find_namespace", {"account": account, "title": title})
            if taken and taken[0][0] != namespace_id:
                raise _title_taken(title)
            run("rename_namespace", {"account": account, "id": namespace_id, "title": title})

        self._write_titled(rename, title)
        return KVNamespaceInfo(namespace_id, title)

    def delete_namespace(self, account: str, namespace_id: str) -> None:
        check_namespace_id(namespace_id)

        def delete(run: Run) -> None:
            _require(run, account, namespace_id)
            run("delete_entries_of_namespace", {"id": namespace_id})
            run("delete_namespace", {"account": account, "id": namespace_id})

        self._write(delete)

    # -- keys --------------------------------------------------------------------------------
    def put_many(self, account: str, namespace_id: str, writes: Sequence[KVWrite]) -> None:
        check_namespace_id(namespace_id)
        check_count("a bulk write", len(writes), MAX_BULK_WRITE)
        now_ms = self.clock.now_ms()
        rows = [
            {
                "id": namespace_id,
                "key": w.key,
                "value": w.data,
                "kind": w.kind,
                "metadata": w.metadata,
                "expiration": w.expires_at(now_ms),
            }
            for w in writes
        ]

        def put(run: Run) -> None:
            _require(run, account, namespace_id)
            for row in rows:
                run("put_entry", row)

        self._write(put)

    def get(self, account: str, namespace_id: str, key: str) -> KVValue | None:
        check_namespace_id(namespace_id)
        params = {"account": account, "id": namespace_id, "key": key, "now_s": self._now_s()}
        rows = self._read(lambda run: run("get_entry", params))
        if rows:
            return _value(rows[0])
        self.get_namespace(account, namespace_id)  # a missing namespace is an error, a missing key not
        return None

    def get_many(self, account: str, namespace_id: str, keys: Sequence[str]) -> dict[str, KVValue | None]:
        check_namespace_id(namespace_id)
        check_count("a bulk get", len(keys), MAX_BULK_GET)
        for key in keys:
            check_key(key)
        now_s = self._now_s()

        def get(run: Run) -> dict[str, KVValue | None]:
            _require(run, account, namespace_id)
            found: dict[str, KVValue | None] = {}
            for key in keys:
                rows = run("get_entry", {"account": account, "id": namespace_id, "key": key, "now_s": now_s})
                found[key] = _value(rows[0]) if rows else None
            return found

        return self._read(get)

    def delete_many(self, account: str, namespace_id: str, keys: Sequence[str]) -> None:
        check_namespace_id(namespace_id)
        check_count("a bulk delete", len(keys), MAX_BULK_WRITE)
        for key in keys:
            check_key(key)

        def delete(run: Run) -> None:
            _require(run, account, namespace_id)
            for key in keys:
                run("delete_entry", {"id": namespace_id, "key": key})

        self._write(delete)

    def list(
        self, account: str, namespace_id: str, *, prefix: str = "", cursor: str = "", limit: int = 1000
    ) -> KVKeyPage:
        check_namespace_id(namespace_id)
        check_list_limit(limit)
        if not isinstance(prefix, str):
            raise InvalidRequest(f"a KV list prefix must be a string, not {type(prefix).__name__}")
        after = decode_cursor(cursor)
        end = prefix_end(prefix)
        params = {
            "id": namespace_id,
            "start": max(prefix, after),
            "after": after,
            "end": end,
            "now_s": self._now_s(),
            "limit": limit + 1,
        }

        def page(run: Run) -> list[Row]:
            _require(run, account, namespace_id)
            return run("list_keys_until" if end is not None else "list_keys", params)

        rows = self._read(page)
        keys = [KVKey(name, expiration, metadata_of(meta)) for name, expiration, meta in rows[:limit]]
        if len(rows) > limit:
            return KVKeyPage(keys, False, encode_cursor(keys[-1].name))
        return KVKeyPage(keys, True)

    def purge_expired(self) -> int:
        total = 0
        while True:
            removed = self._write(self._purge_batch)
            total += removed
            if removed < PURGE_BATCH:
                return total

    def _purge_batch(self, run: Run) -> int:
        return len(run("purge_expired", {"now_s": self._now_s(), "limit": PURGE_BATCH}))


def _require(run: Run, account: str, namespace_id: str) -> None:
    if not run("get_namespace", {"account": account, "id": namespace_id}):
        raise _not_found(namespace_id)


def _not_found(namespace_id: str) -> KVNamespaceNotFound:
    return KVNamespaceNotFound(f"there is no KV namespace with id {namespace_id!r}")


def _title_taken(title: str) -> KVNamespaceExists:
    return KVNamespaceExists(f"a KV namespace titled {title!r} already exists in this account")


def _value(row: Row) -> KVValue:
    data, kind, metadata, expiration = row
    return KVValue(bytes(data), cast(Kind, kind), metadata_of(metadata), expiration)
