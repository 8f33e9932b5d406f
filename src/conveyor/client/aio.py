"""The asyncio client: :class:`AsyncConveyor` and :class:`AsyncQueue`, the same methods awaitable.

One implementation of the logic, as in httpx's twin clients: each method runs its synchronous twin
on a worker thread (``asyncio.to_thread``), so an event loop is never blocked by a send's fsync or a
server round trip, and both clients behave the same by construction.

>>> cv = await conveyor.connect_async("sqlite:///tmp/conveyor")
>>> q = await cv.create_queue("emails")
>>> await q.send({"to": "a@b"})
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from conveyor.client.backpressure import QueueLimits
from conveyor.client.connect import connect
from conveyor.client.sync import Conveyor, Queue
from conveyor.model import (
    AckResult,
    ConsumerInfo,
    ConsumerSettings,
    ConsumerType,
    Counters,
    Metrics,
    PulledMessage,
    QueueInfo,
    SendBatchResult,
    SendResult,
)

if TYPE_CHECKING:  # workflows sit above the client: imported when used, never at module level
    from conveyor.storage import BucketInfo
    from conveyor.storage.aio import AsyncBucket
    from conveyor.storage.kv import KVNamespaceInfo
    from conveyor.storage.kv_aio import AsyncKVNamespace
    from conveyor.workflows.aio import AsyncWorkflow
    from conveyor.workflows.counter import AsyncCounter


async def connect_async(
    url: str | None = None,
    *,
    token: str | None = None,
    account_id: str | None = None,
    queue_limits: QueueLimits | None = None,
) -> AsyncConveyor:
    """Open a deployment for asyncio code; the same URLs and keywords as :func:`conveyor.connect`."""
    opened = await asyncio.to_thread(connect, url, token=token, account_id=account_id, queue_limits=queue_limits)
    return AsyncConveyor(opened)


class AsyncConveyor:
    """The queues of one deployment, for asyncio code."""

    def __init__(self, client: Conveyor) -> None:
        self.sync = client

    async def __aenter__(self) -> AsyncConveyor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def create_queue(self, name: str, **settings: Any) -> AsyncQueue:
        """Create a queue; the settings are :meth:`Conveyor.create_queue`'s."""
        return AsyncQueue(await asyncio.to_thread(self.sync.create_queue, name, **settings))

    async def queue(self, name: str) -> AsyncQueue:
        return AsyncQueue(await asyncio.to_thread(self.sync.queue, name))

    async def list_queues(self) -> list[QueueInfo]:
        return await asyncio.to_thread(self.sync.list_queues)

    async def delete_queue(self, name: str, *, force: bool = False) -> list[str]:
        return await asyncio.to_thread(self.sync.delete_queue, name, force=force)

    async def workflow(self, name: str) -> AsyncWorkflow:
        """The workflow ``name`` (a :class:`conveyor.workflows.aio.AsyncWorkflow`);
        ``conveyor.WorkflowNotFound`` until a worker that runs it has started."""
        from conveyor.workflows.aio import AsyncWorkflow

        return AsyncWorkflow(await asyncio.to_thread(self.sync.workflow, name))

    async def list_workflows(self) -> list[AsyncWorkflow]:
        """:meth:`Conveyor.list_workflows`."""
        from conveyor.workflows.aio import AsyncWorkflow

        return [AsyncWorkflow(wf) for wf in await asyncio.to_thread(self.sync.list_workflows)]

    async def put_workflow(self, name: str, **settings: Any) -> AsyncWorkflow:
        """:meth:`Conveyor.put_workflow`, with the same keywords."""
        from conveyor.workflows.aio import AsyncWorkflow

        return AsyncWorkflow(await asyncio.to_thread(functools.partial(self.sync.put_workflow, name, **settings)))

    async def counter(self, name: str) -> AsyncCounter:
        """The counter ``name`` of this account (a :class:`conveyor.workflows.counter.AsyncCounter`):
        :meth:`Conveyor.counter`'s, awaitable."""
        from conveyor.workflows.counter import AsyncCounter

        return AsyncCounter(await asyncio.to_thread(self.sync.counter, name))

    # -- buckets (conveyor.storage) -----------------------------------------------------------
    async def create_bucket(self, name: str, **location: str | None) -> AsyncBucket:
        """Create a bucket; ``location`` is :meth:`Conveyor.create_bucket`'s (url, endpoint, ...)."""
        from conveyor.storage.aio import AsyncBucket

        return AsyncBucket(await asyncio.to_thread(self.sync.create_bucket, name, **location))

    async def bucket(self, name: str) -> AsyncBucket:
        from conveyor.storage.aio import AsyncBucket

        return AsyncBucket(await asyncio.to_thread(self.sync.bucket, name))

    async def list_buckets(self) -> list[BucketInfo]:
        return await asyncio.to_thread(self.sync.list_buckets)

    async def delete_bucket(self, name: str) -> None:
        await asyncio.to_thread(self.sync.delete_bucket, name)

    # -- KV namespaces: Conveyor.kv's twins ---------------------------------------------------------
    async def kv(self, title: str, *, create: bool = False) -> AsyncKVNamespace:
        """:meth:`Conveyor.kv`: the namespace titled ``title`` (``create=True`` makes it if missing)."""
        from conveyor.storage.kv_aio import AsyncKVNamespace

        return AsyncKVNamespace(await asyncio.to_thread(self.sync.kv, title, create=create))

    async def kv_by_id(self, namespace_id: str) -> AsyncKVNamespace:
        from conveyor.storage.kv_aio import AsyncKVNamespace

        return AsyncKVNamespace(await asyncio.to_thread(self.sync.kv_by_id, namespace_id))

    async def create_kv_namespace(self, title: str) -> AsyncKVNamespace:
        from conveyor.storage.kv_aio import AsyncKVNamespace

        return AsyncKVNamespace(await asyncio.to_thread(self.sync.create_kv_namespace, title))

    async def list_kv_namespaces(self) -> list[KVNamespaceInfo]:
        return await asyncio.to_thread(self.sync.list_kv_namespaces)

    async def delete_kv_namespace(self, title: str) -> None:
        await asyncio.to_thread(self.sync.delete_kv_namespace, title)


class AsyncQueue:
    """A handle on one queue, for asyncio code."""

    def __init__(self, queue: Queue) -> None:
        self.sync = queue

    def __repr__(self) -> str:
        return f"<AsyncQueue {self.name} {self.id}>"

    @property
    def name(self) -> str:
        return self.sync.name

    @property
    def id(self) -> str:
        return self.sync.id

    async def info(self, max_age: float = 0.0) -> QueueInfo:
        return await asyncio.to_thread(self.sync.info, max_age)

    async def send(self, body: Any, content_type: str = "json", delay_seconds: int | None = None) -> SendResult:
        """:meth:`Queue.send`: the message's ``id`` and the queue's ``metrics``."""
        return await asyncio.to_thread(self.sync.send, body, content_type, delay_seconds)

    async def send_batch(
        self, messages: Sequence[Mapping[str, Any]], delay_seconds: int | None = None
    ) -> SendBatchResult:
        """:meth:`Queue.send_batch`: the messages' ``ids`` and the queue's ``metrics``."""
        return await asyncio.to_thread(self.sync.send_batch, messages, delay_seconds)

    async def metrics(self) -> Metrics:
        return await asyncio.to_thread(self.sync.metrics)

    async def counters(self) -> Counters:
        return await asyncio.to_thread(self.sync.counters)

    async def update(self, **settings: Any) -> QueueInfo:
        return await asyncio.to_thread(self.sync.update, **settings)

    async def pause_delivery(self) -> QueueInfo:
        return await asyncio.to_thread(self.sync.pause_delivery)

    async def resume_delivery(self) -> QueueInfo:
        return await asyncio.to_thread(self.sync.resume_delivery)

    async def purge(self) -> int:
        return await asyncio.to_thread(self.sync.purge)

    async def peek(self, batch_size: int = 10) -> list[PulledMessage]:
        return await asyncio.to_thread(self.sync.peek, batch_size)

    async def redrive(self, to: str) -> int:
        return await asyncio.to_thread(self.sync.redrive, to)

    async def delete(self, *, force: bool = False) -> list[str]:
        return await asyncio.to_thread(self.sync.delete, force=force)

    async def consumer(self) -> ConsumerInfo | None:
        return await asyncio.to_thread(self.sync.consumer)

    async def add_consumer(
        self,
        type: ConsumerType,
        *,
        script_name: str = "",
        settings: ConsumerSettings | None = None,
        dead_letter_queue: str | None = None,
    ) -> ConsumerInfo:
        return await asyncio.to_thread(
            self.sync.add_consumer,
            type,
            script_name=script_name,
            settings=settings,
            dead_letter_queue=dead_letter_queue,
        )

    async def add_pull_consumer(self, **settings: Any) -> ConsumerInfo:
        """Register an ``http_pull`` consumer; the settings are :meth:`Queue.add_pull_consumer`'s."""
        return await asyncio.to_thread(self.sync.add_pull_consumer, **settings)

    async def remove_consumer(
        self, *, type: ConsumerType | None = None, script_name: str | None = None
    ) -> ConsumerInfo:
        return await asyncio.to_thread(self.sync.remove_consumer, type=type, script_name=script_name)

    async def pull(
        self, batch_size: int | None = None, visibility_timeout_ms: int | None = None
    ) -> list[PulledMessage]:
        return await asyncio.to_thread(self.sync.pull, batch_size, visibility_timeout_ms)

    async def ack(self, acks: Sequence[str] = (), retries: Sequence[tuple[str, int | None] | str] = ()) -> AckResult:
        return await asyncio.to_thread(self.sync.ack, acks, retries)
