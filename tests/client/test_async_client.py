"""The asyncio client: the same API as the synchronous one, awaitable, on every engine."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import conveyor


def test_async_client_sends_pulls_and_acks(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with await conveyor.connect_async(f"sqlite://{tmp_path / 'data'}") as cv:
            q = await cv.create_queue("jobs", delivery_delay=0)
            await q.add_pull_consumer(batch_size=10)
            first = await q.send({"n": 1})
            assert first.metrics.backlog_count == 1
            others = await asyncio.gather(*(q.send({"n": n}) for n in range(2, 11)))
            batch = await q.send_batch([{"body": "text", "content_type": "text"}])
            pulled = await q.pull(batch_size=20)
            assert len(pulled) == 11
            # Every send said which id its message got.
            assert {m.id for m in pulled} == {first.id, *(r.id for r in others), *batch.ids}
            result = await q.ack(acks=[m.lease_id for m in pulled])
            assert (result.ack_count, result.retry_count) == (11, 0)
            assert (await q.metrics()).backlog_count == 0
            assert [info.queue_name for info in await cv.list_queues()] == ["jobs"]
            with pytest.raises(conveyor.QueueNotFound):
                await cv.queue("missing")

    asyncio.run(scenario())


def test_async_client_refuses_what_the_sync_one_refuses(tmp_path: Path) -> None:
    async def scenario() -> None:
        cv = await conveyor.connect_async(f"sqlite://{tmp_path / 'data'}")
        try:
            q = await cv.create_queue("jobs")
            with pytest.raises(conveyor.MessageTooLarge, match="the limit is 128000"):
                await q.send("x" * 130_000, content_type="text")
            with pytest.raises(conveyor.InvalidQueueName):
                await cv.create_queue("Not_Valid")
            assert (await q.metrics()).backlog_count == 0
        finally:
            await cv.close()

    asyncio.run(scenario())
