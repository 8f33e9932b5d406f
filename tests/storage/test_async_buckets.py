"""The bucket methods on connect_async: the same behaviour, awaitable."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import conveyor


def test_async_buckets_do_what_the_sync_ones_do(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with await conveyor.connect_async(f"sqlite://{tmp_path / 'data'}") as cv:
            await cv.create_queue("events")
            b = await cv.create_bucket("cdn")
            rule = await b.add_notification("events", actions=["PutObject"])
            assert [r.rule_id for r in await b.notifications()] == [rule.rule_id]
            info = await b.put("a.txt", b"hello", content_type="text/plain")
            assert (await b.head("a.txt")) == info
            assert (await b.get("a.txt")).bytes() == b"hello"
            assert (await b.get("a.txt", range=(1, 3))).bytes() == b"el"
            assert [o.key for o in await b.list()] == ["a.txt"]
            await b.copy("a.txt", "b.txt")
            assert await b.delete(["a.txt", "b.txt"]) == 2
            lifecycle = await b.add_lifecycle_rule(60, prefix="tmp/")
            assert [r.rule_id for r in await b.lifecycle_rules()] == [lifecycle.rule_id]
            assert [x.name for x in await cv.list_buckets()] == ["cdn"]
            assert (await cv.bucket("cdn")).name == "cdn"
            await cv.delete_bucket("cdn")
            with pytest.raises(conveyor.BucketNotFound):
                await cv.bucket("cdn")

    asyncio.run(scenario())
