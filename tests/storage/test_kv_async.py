"""The async client's KV twins (``connect_async``): the same behaviour, awaited."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import conveyor
from conveyor.storage.kv_errors import KVNamespaceNotFound


def test_async_twins_put_get_list_and_delete(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with await conveyor.connect_async(f"sqlite://{tmp_path / 'data'}") as acv:
            with pytest.raises(KVNamespaceNotFound):
                await acv.kv("cdn-meta")
            kv = await acv.kv("cdn-meta", create=True)
            await kv.put("jquery", {"latest": "3.7.1"}, metadata={"sri": "x"})
            await kv.put_many([{"key": f"j{i:02}", "value": str(i)} for i in range(12)])
            assert await kv.get("jquery") == {"latest": "3.7.1"}
            assert await kv.get_with_metadata("jquery") == ({"latest": "3.7.1"}, {"sri": "x"})
            assert [k.name async for k in kv.list(prefix="j0", limit=10)] == [f"j{i:02}" for i in range(10)]
            assert len([k async for k in kv.list(limit=10)]) == 13
            await kv.delete("jquery")
            assert await kv.get("jquery") is None
            assert [n.title for n in await acv.list_kv_namespaces()] == ["cdn-meta"]
            await acv.delete_kv_namespace("cdn-meta")
            assert await acv.list_kv_namespaces() == []

    asyncio.run(scenario())
