"""One account's bucket: the object API (:class:`Bucket`) and a read object (:class:`ObjectBody`)."""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from conveyor.storage.errors import InvalidObjectKey
from conveyor.storage.model import BucketInfo, LifecycleRule, NotificationRule, ObjectInfo
from conveyor.storage.names import check_content_type, check_key, check_metadata, check_prefix
from conveyor.storage.service import MULTIPART_THRESHOLD, Data, StorageService

if TYPE_CHECKING:
    from conveyor.client.sync import Conveyor
    from conveyor.storage.remote import RemoteStorage


class ObjectBody:
    """An object read by :meth:`Bucket.get`: ``info`` (its metadata), and its bytes, read whole
    (:meth:`bytes`) or streamed in chunks (iterate it). A range read holds only that range."""

    def __init__(self, info: ObjectInfo, result: Any, byte_range: tuple[int, int] | None) -> None:
        self.info = info
        self.range = byte_range
        self._result = result

    @property
    def key(self) -> str:
        return self.info.key

    def bytes(self) -> builtins.bytes:
        return b"" if self._result is None else builtins.bytes(self._result.bytes())

    def text(self, encoding: str = "utf-8") -> str:
        return self.bytes().decode(encoding)

    def __iter__(self) -> Iterator[builtins.bytes]:
        if self._result is None:
            return
        for chunk in self._result.stream(min_chunk_size=64 * 1024):
            yield builtins.bytes(chunk)

    def __repr__(self) -> str:
        return f"ObjectBody({self.info!r}, range={self.range!r})"


class Bucket:
    """A bucket of one account. Every write made here (put, copy, delete, lifecycle deletion)
    sends the matching notification rules' messages at least once.

    >>> b = cv.create_bucket("cdn")
    >>> b.put("jquery/3.7.1/jquery.min.js", data, content_type="application/javascript")
    ObjectInfo(key='jquery/3.7.1/jquery.min.js', size=87533, etag='...', ...)
    >>> b.get("jquery/3.7.1/jquery.min.js").bytes()[:9]
    b'/*! jQuer'
    """

    multipart_threshold = MULTIPART_THRESHOLD

    def __init__(
        self, conveyor: Conveyor, service: StorageService | RemoteStorage, account: str, info: BucketInfo
    ) -> None:
        self._conveyor = conveyor
        self._service = service
        self.account = account
        self.info = info

    @property
    def name(self) -> str:
        return self.info.name

    def __repr__(self) -> str:
        return f"Bucket({self.name!r}, location={self.info.location!r})"

    def put(
        self,
        key: str,
        data: Data,
        *,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
        only_if_absent: bool = False,
    ) -> ObjectInfo:
        """Store ``data`` (bytes, a binary file, or an iterator of bytes) under ``key``; returns once
        the bytes are durable and the metadata committed. Above ``multipart_threshold`` bytes the
        upload goes in parts (``CompleteMultipartUpload``). ``only_if_absent``: refuse
        (``ObjectExists``) if the key holds an object."""
        check_key(key)
        if isinstance(data, str):
            raise InvalidObjectKey("put takes bytes, a binary file or an iterator of bytes; encode text first")
        return self._service.put(
            self.account,
            self.name,
            key,
            data,
            content_type=check_content_type(content_type),
            metadata=check_metadata(metadata),
            only_if_absent=bool(only_if_absent),
        )

    def get(self, key: str, range: tuple[int, int] | None = None) -> ObjectBody:
        """The object at ``key`` (``ObjectNotFound`` if none); ``range=(start, end)``: bytes
        ``start`` up to, not including, ``end``."""
        check_key(key)
        if range is not None:
            if (
                not isinstance(range, Sequence)
                or len(range) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in range)
                or not 0 <= range[0] <= range[1]
            ):
                raise InvalidObjectKey(f"range must be (start, end) with 0 <= start <= end, not {range!r}")
            range = (int(range[0]), int(range[1]))
        info, result = self._service.get(self.account, self.name, key, range)
        return ObjectBody(info, result, range)

    def get_nowait(self, key: str) -> ObjectBody | None:
        """The whole object at ``key`` if it can be read without waiting for a lock, a file or the
        network — a small object of a local bucket, whose bytes are in its row of a SQLite
        deployment's catalog — for code on an event loop's thread; None when reading it would wait
        (its bytes in a file or S3, a PostgreSQL or server deployment): :meth:`get` it on a thread
        then. ``ObjectNotFound`` if there is none.

        >>> body = b.get_nowait(key) or await asyncio.to_thread(b.get, key)
        >>> body.bytes()
        """
        found = self._service.get_nowait(self.account, self.name, check_key(key))
        return None if found is None else ObjectBody(found[0], found[1], None)

    def head(self, key: str) -> ObjectInfo:
        """The metadata of the object at ``key``; ``ObjectNotFound`` if none."""
        return self._service.head(self.account, self.name, check_key(key))

    def exists(self, key: str) -> bool:
        return self._service.exists(self.account, self.name, check_key(key))

    def delete(self, key: str | Sequence[str]) -> int:
        """Delete one key or several; a missing key is not an error. Returns how many existed."""
        keys = [key] if isinstance(key, str) else builtins.list(key)
        for one in keys:
            check_key(one)
        return len(self._service.delete(self.account, self.name, keys))

    def copy(self, source: str, destination: str) -> ObjectInfo:
        """Copy ``source`` to ``destination`` in this bucket (``CopyObject``)."""
        return self._service.copy(self.account, self.name, check_key(source), check_key(destination))

    def list(self, prefix: str = "", start_after: str = "") -> Iterator[ObjectInfo]:
        """Objects in key order (bytewise), read from the engine a page at a time as iterated."""
        return self._service.list_objects(
            self.account, self.name, check_prefix(prefix), check_prefix(start_after, "start_after")
        )

    # -- notification and lifecycle rules -----------------------------------------------------
    def add_notification(
        self, queue: str, actions: Sequence[str], prefix: str = "", suffix: str = "", description: str = ""
    ) -> NotificationRule:
        """Send R2's event message to ``queue`` for every write whose action is in ``actions``
        (``PutObject``, ``CopyObject``, ``CompleteMultipartUpload``, ``DeleteObject``,
        ``LifecycleDeletion``, or wrangler's ``object-create``/``object-delete``) and whose key has
        ``prefix`` and ``suffix``."""
        q = self._conveyor.queue(queue)
        return self._service.add_notification(
            self.account, self.name, q.id, queue, actions, prefix, suffix, description
        )

    def notifications(self) -> builtins.list[NotificationRule]:
        return self._service.notifications(self.account, self.name)

    def remove_notification(self, rule_id: str) -> None:
        self._service.remove_notification(self.account, self.name, rule_id)

    def add_lifecycle_rule(self, max_age_seconds: int, prefix: str = "") -> LifecycleRule:
        """Delete objects under ``prefix`` once they are ``max_age_seconds`` old (the coordinator's
        ``storage-lifecycle`` service, ``LifecycleDeletion`` notifications)."""
        return self._service.add_lifecycle_rule(self.account, self.name, prefix, max_age_seconds)

    def lifecycle_rules(self) -> builtins.list[LifecycleRule]:
        return self._service.lifecycle_rules(self.account, self.name)

    def remove_lifecycle_rule(self, rule_id: str) -> None:
        self._service.remove_lifecycle_rule(self.account, self.name, rule_id)
