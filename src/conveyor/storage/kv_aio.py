"""The asyncio twin of :class:`~conveyor.storage.kv_handle.KVNamespace`: the same methods, each
run on a thread (``asyncio.to_thread``), as the rest of the async client.

>>> kv = await acv.kv("cdn-meta")
>>> await kv.put("jquery", {"latest": "3.7.1"}); await kv.get("jquery")
{'latest': '3.7.1'}
>>> [k.name async for k in kv.list(prefix="j")]
['jquery']
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from conveyor.storage.kv import Kind, KVKey, KVKeyPage, KVValue
from conveyor.storage.kv_handle import KVNamespace


class AsyncKVNamespace:
    def __init__(self, namespace: KVNamespace) -> None:
        self.sync = namespace

    def __repr__(self) -> str:
        return f"<AsyncKVNamespace {self.title} {self.id}>"

    @property
    def id(self) -> str:
        return self.sync.id

    @property
    def title(self) -> str:
        return self.sync.title

    async def put(
        self,
        key: str,
        value: Any,
        *,
        metadata: Any = None,
        expiration: int | None = None,
        expiration_ttl: int | None = None,
    ) -> None:
        await asyncio.to_thread(
            self.sync.put, key, value, metadata=metadata, expiration=expiration, expiration_ttl=expiration_ttl
        )

    async def put_many(self, entries: Sequence[Mapping[str, Any]]) -> None:
        await asyncio.to_thread(self.sync.put_many, entries)

    async def get(self, key: str, *, type: Kind | None = None) -> Any:
        return await asyncio.to_thread(self.sync.get, key, type=type)

    async def get_with_metadata(self, key: str, *, type: Kind | None = None) -> tuple[Any, Any]:
        return await asyncio.to_thread(self.sync.get_with_metadata, key, type=type)

    async def get_value(self, key: str) -> KVValue | None:
        return await asyncio.to_thread(self.sync.get_value, key)

    async def get_many(self, keys: Sequence[str], *, type: Kind | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.get_many, keys, type=type)

    async def delete(self, key: str) -> None:
        await asyncio.to_thread(self.sync.delete, key)

    async def delete_many(self, keys: Sequence[str]) -> None:
        await asyncio.to_thread(self.sync.delete_many, keys)

    async def list_page(self, *, prefix: str = "", cursor: str = "", limit: int = 1000) -> KVKeyPage:
        return await asyncio.to_thread(self.sync.list_page, prefix=prefix, cursor=cursor, limit=limit)

    async def list(self, *, prefix: str = "", limit: int = 1000) -> AsyncIterator[KVKey]:
        """Every live key starting with ``prefix``, read lazily ``limit`` at a time."""
        cursor = ""
        while True:
            page = await self.list_page(prefix=prefix, cursor=cursor, limit=limit)
            for key in page.keys:
                yield key
            if page.list_complete:
                return
            cursor = page.cursor
