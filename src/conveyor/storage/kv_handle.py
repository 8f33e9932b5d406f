"""A handle on one KV namespace for Python code: ``kv = cv.kv("cdn-meta")``.

Values come back as they went in: a ``str`` is stored as UTF-8 and read as ``str``; ``bytes`` (or a
bytearray or memoryview) as given and read as ``bytes``; anything else is stored as compact JSON and
read decoded. A value written over REST without Conveyor's type header reads as ``bytes``;
``get(key, type="text")`` (or ``"json"``, ``"bytes"``) reads any value as that type.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from conveyor.errors import InvalidRequest
from conveyor.storage.kv import (
    Kind,
    KVKey,
    KVKeyPage,
    KVNamespaceInfo,
    KVStore,
    KVValue,
    KVWrite,
    check_key,
    check_write,
    encode_value,
    open_kv_store,
)

COMPONENT_KEY = "kv"


class KVNamespace:
    """One KV namespace of the client's account.

    >>> kv = cv.kv("cdn-meta")
    >>> kv.put("jquery", {"latest": "3.7.1"}, metadata={"sri": "sha384-..."}, expiration_ttl=3600)
    >>> kv.get("jquery")
    {'latest': '3.7.1'}
    >>> [k.name for k in kv.list(prefix="j")]
    ['jquery']
    """

    def __init__(self, store: KVStore, account: str, info: KVNamespaceInfo) -> None:
        self._store = store
        self._account = account
        self.info = info

    def __repr__(self) -> str:
        return f"<KVNamespace {self.title} {self.id}>"

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def title(self) -> str:
        return self.info.title

    def put(
        self,
        key: str,
        value: Any,
        *,
        metadata: Any = None,
        expiration: int | None = None,
        expiration_ttl: int | None = None,
    ) -> None:
        """Store ``value`` under ``key`` (durable when this returns), replacing what was there.
        ``expiration``: seconds since the epoch, at least 60 s ahead; ``expiration_ttl``: seconds
        from now, at least 60 (it wins when both are given)."""
        self._store.put(self._account, self.id, self._write(key, value, metadata, expiration, expiration_ttl))

    def put_many(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """Store up to 10,000 entries at once, all or none: mappings of ``key``, ``value`` and,
        optionally, ``metadata``, ``expiration``, ``expiration_ttl`` (any other key is refused)."""
        allowed = {"key", "value", "metadata", "expiration", "expiration_ttl"}
        writes = []
        for entry in entries:
            unknown = set(entry) - allowed
            if unknown or "key" not in entry or "value" not in entry:
                raise InvalidRequest(
                    f"a bulk KV entry needs 'key' and 'value' and may have only {sorted(allowed)}; got {sorted(entry)}"
                )
            writes.append(
                self._write(
                    entry["key"],
                    entry["value"],
                    entry.get("metadata"),
                    entry.get("expiration"),
                    entry.get("expiration_ttl"),
                )
            )
        self._store.put_many(self._account, self.id, writes)

    def _write(self, key: Any, value: Any, metadata: Any, expiration: Any, expiration_ttl: Any) -> KVWrite:
        data, kind = encode_value(value)
        return check_write(
            key,
            data,
            kind,
            metadata=metadata,
            expiration=expiration,
            expiration_ttl=expiration_ttl,
            now_ms=self._store.clock.now_ms(),
        )

    def get(self, key: str, *, type: Kind | None = None) -> Any:
        """The value, as it was given (or read as ``type``); ``None`` if the key is missing or expired."""
        found = self._store.get(self._account, self.id, check_key(key))
        return None if found is None else found.decoded(type)

    def get_with_metadata(self, key: str, *, type: Kind | None = None) -> tuple[Any, Any]:
        """``(value, metadata)``; ``(None, None)`` if the key is missing or expired."""
        found = self._store.get(self._account, self.id, check_key(key))
        return (None, None) if found is None else (found.decoded(type), found.metadata)

    def get_value(self, key: str) -> KVValue | None:
        """The stored record (bytes, kind, metadata, expiration), or ``None``."""
        return self._store.get(self._account, self.id, check_key(key))

    def get_many(self, keys: Sequence[str], *, type: Kind | None = None) -> dict[str, Any]:
        """Up to 100 keys' values (``None`` for each missing one)."""
        found = self._store.get_many(self._account, self.id, [check_key(k) for k in keys])
        return {k: None if v is None else v.decoded(type) for k, v in found.items()}

    def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is no error."""
        self._store.delete(self._account, self.id, check_key(key))

    def delete_many(self, keys: Sequence[str]) -> None:
        """Remove up to 10,000 keys at once."""
        self._store.delete_many(self._account, self.id, [check_key(k) for k in keys])

    def list_page(self, *, prefix: str = "", cursor: str = "", limit: int = 1000) -> KVKeyPage:
        """One page of keys (10..1000), in byte order; pass its ``cursor`` for the next."""
        return self._store.list(self._account, self.id, prefix=prefix, cursor=cursor, limit=limit)

    def list(self, *, prefix: str = "", limit: int = 1000) -> Iterator[KVKey]:
        """Every live key starting with ``prefix``, in byte order, read lazily ``limit`` at a time."""
        cursor = ""
        while True:
            page = self.list_page(prefix=prefix, cursor=cursor, limit=limit)
            yield from page.keys
            if page.list_complete:
                return
            cursor = page.cursor


def kv_store(client: Any) -> KVStore:
    """The client's KV store, opened once per client (``Conveyor.component``)."""
    store: KVStore = client.component(COMPONENT_KEY, open_kv_store)
    return store
