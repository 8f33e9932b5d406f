"""The asyncio twins of :class:`~conveyor.workflows.client.Workflow` and ``Instance``: the same
methods, awaitable, each running its synchronous twin on a worker thread (one implementation).

>>> wf = await acv.workflow("download-package")
>>> inst = await wf.create(params={"name": "jquery"})
>>> (await inst.status()).status
'queued'
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from conveyor.workflows.client import BatchResult, Instance, Workflow
from conveyor.workflows.model import InstancePage, InstanceStatus, WorkflowRecord, WorkflowVersion


class AsyncWorkflow:
    def __init__(self, workflow: Workflow) -> None:
        self.sync = workflow

    @property
    def name(self) -> str:
        return self.sync.name

    @property
    def record(self) -> WorkflowRecord:
        return self.sync.record

    async def create(
        self, params: Any = None, id: str | None = None, *, traceparent: str | None = None
    ) -> AsyncInstance:
        # to_thread carries the caller's context, so the instance joins the caller's trace.
        return AsyncInstance(await asyncio.to_thread(self.sync.create, params, id, traceparent=traceparent))

    async def create_batch(
        self, items: Sequence[Mapping[str, Any]], *, traceparent: str | None = None, all_or_none: bool = False
    ) -> BatchResult:
        create = functools.partial(self.sync.create_batch, items, traceparent=traceparent, all_or_none=all_or_none)
        return await asyncio.to_thread(create)

    async def get(self, id: str) -> AsyncInstance:
        return AsyncInstance(await asyncio.to_thread(self.sync.get, id))

    async def list_instances(self, status: str | None = None, **options: Any) -> InstancePage:
        """:meth:`Workflow.list_instances`, with the same keywords."""
        return await asyncio.to_thread(self.sync.list_instances, status, **options)

    async def reload(self) -> AsyncWorkflow:
        return AsyncWorkflow(await asyncio.to_thread(self.sync.reload))

    async def delete(self) -> None:
        await asyncio.to_thread(self.sync.delete)

    async def versions(self) -> list[WorkflowVersion]:
        return await asyncio.to_thread(self.sync.versions)

    async def version(self, version_id: str) -> WorkflowVersion:
        return await asyncio.to_thread(self.sync.version, version_id)

    async def instance_counts(self, **dates: Any) -> dict[str, int]:
        """:meth:`Workflow.instance_counts`, with the same keywords."""
        return await asyncio.to_thread(functools.partial(self.sync.instance_counts, **dates))

    async def has_worker(self) -> bool:
        return await asyncio.to_thread(self.sync.has_worker)


class AsyncInstance:
    def __init__(self, instance: Instance) -> None:
        self.sync = instance

    @property
    def id(self) -> str:
        return self.sync.id

    async def status(self) -> InstanceStatus:
        return await asyncio.to_thread(self.sync.status)

    async def pause(self) -> None:
        await asyncio.to_thread(self.sync.pause)

    async def resume(self) -> None:
        await asyncio.to_thread(self.sync.resume)

    async def terminate(self) -> None:
        await asyncio.to_thread(self.sync.terminate)

    async def restart(self, from_step: str | Mapping[str, Any] | None = None) -> None:
        await asyncio.to_thread(self.sync.restart, from_step)

    async def send_event(self, type: str, payload: Any = None) -> None:
        await asyncio.to_thread(self.sync.send_event, type, payload)

    async def delete(self) -> None:
        await asyncio.to_thread(self.sync.delete)
