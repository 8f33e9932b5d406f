"""A bucket for asyncio code: each method runs its :class:`~conveyor.storage.Bucket` twin on a
worker thread, as :mod:`conveyor.client.aio` does for queues.

>>> b = await acv.create_bucket("cdn")
>>> await b.put("a.txt", b"hello")
>>> (await b.get("a.txt")).bytes()
b'hello'
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Iterator, Mapping, Sequence

from conveyor.storage.bucket import Bucket, ObjectBody
from conveyor.storage.model import LifecycleRule, NotificationRule, ObjectInfo
from conveyor.storage.service import Data


class AsyncBucket:
    def __init__(self, bucket: Bucket) -> None:
        self.sync = bucket

    @property
    def name(self) -> str:
        return self.sync.name

    def __repr__(self) -> str:
        return f"Async{self.sync!r}"

    async def put(
        self,
        key: str,
        data: Data,
        *,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
        only_if_absent: bool = False,
    ) -> ObjectInfo:
        return await asyncio.to_thread(
            self.sync.put, key, data, content_type=content_type, metadata=metadata, only_if_absent=only_if_absent
        )

    async def get(self, key: str, range: tuple[int, int] | None = None) -> ObjectBody:
        """The object, its bytes read into memory on the worker thread."""

        def read() -> ObjectBody:
            body = self.sync.get(key, range=range)
            return _ReadBody(body.info, body.bytes(), range)

        return await asyncio.to_thread(read)

    async def head(self, key: str) -> ObjectInfo:
        return await asyncio.to_thread(self.sync.head, key)

    async def exists(self, key: str) -> bool:
        return await asyncio.to_thread(self.sync.exists, key)

    async def delete(self, key: str | Sequence[str]) -> int:
        return await asyncio.to_thread(self.sync.delete, key)

    async def copy(self, source: str, destination: str) -> ObjectInfo:
        return await asyncio.to_thread(self.sync.copy, source, destination)

    async def list(self, prefix: str = "", start_after: str = "") -> builtins.list[ObjectInfo]:
        """Every object under ``prefix`` (after ``start_after``), as one list."""
        return await asyncio.to_thread(lambda: [*self.sync.list(prefix=prefix, start_after=start_after)])

    async def add_notification(
        self, queue: str, actions: Sequence[str], prefix: str = "", suffix: str = "", description: str = ""
    ) -> NotificationRule:
        return await asyncio.to_thread(self.sync.add_notification, queue, actions, prefix, suffix, description)

    async def notifications(self) -> builtins.list[NotificationRule]:
        return await asyncio.to_thread(self.sync.notifications)

    async def remove_notification(self, rule_id: str) -> None:
        await asyncio.to_thread(self.sync.remove_notification, rule_id)

    async def add_lifecycle_rule(self, max_age_seconds: int, prefix: str = "") -> LifecycleRule:
        return await asyncio.to_thread(self.sync.add_lifecycle_rule, max_age_seconds, prefix)

    async def lifecycle_rules(self) -> builtins.list[LifecycleRule]:
        return await asyncio.to_thread(self.sync.lifecycle_rules)

    async def remove_lifecycle_rule(self, rule_id: str) -> None:
        await asyncio.to_thread(self.sync.remove_lifecycle_rule, rule_id)


class _ReadBody(ObjectBody):
    """An object whose bytes were read already (iterating it yields them in one chunk)."""

    def __init__(self, info: ObjectInfo, data: bytes, byte_range: tuple[int, int] | None) -> None:
        super().__init__(info, None, byte_range)
        self._data = data

    def bytes(self) -> builtins.bytes:
        return self._data

    def __iter__(self) -> Iterator[builtins.bytes]:
        if self._data:
            yield self._data
