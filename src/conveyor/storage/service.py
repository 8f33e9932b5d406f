"""The buckets of one deployment: their catalog, their obstore stores, and the notifications their
writes send. Every call names its account; :class:`conveyor.storage.Bucket` is one account's
bucket over it.

A write is ordered so that a crash never leaves a row pointing at missing bytes: the bytes are made
durable first, then the object's row and its notifications' outbox rows commit in one
transaction, then the notifications are sent and their outbox rows deleted. A crash before the
commit leaves orphan bytes and no row (invisible: listings read the rows); a crash after it leaves
outbox rows that the coordinator's ``storage-outbox`` service sends. A deletion removes the row
(and queues its notifications) first and the bytes after.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import hashlib
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Literal

import obstore

from conveyor import tracing
from conveyor.deployment import Deployment
from conveyor.egress import EgressPolicy, check_url
from conveyor.engine.base import Clock, Engine
from conveyor.engine.tables import WouldWait
from conveyor.errors import ConveyorError, QueueNotFound
from conveyor.ids import ordered_id
from conveyor.model import NewMessage
from conveyor.storage import catalog as catalog_module
from conveyor.storage.catalog import Catalog
from conveyor.storage.database import open_catalog_database
from conveyor.storage.errors import (
    BucketNotFound,
    InvalidBucketLocation,
    InvalidLifecycleRule,
    InvalidNotificationRule,
    InvalidObjectKey,
    ObjectExists,
    ObjectNotFound,
)
from conveyor.storage.model import Action, BucketInfo, LifecycleRule, NotificationRule, ObjectInfo, from_ms
from conveyor.storage.names import check_bucket_name, check_local_key, check_prefix, shown
from conveyor.storage.notifications import MAX_RULES_PER_BUCKET, Event, check_rule, overlaps
from conveyor.storage.stores import (
    BucketConfig,
    check_reachable,
    file_directory,
    fsync_local,
    missing_directories,
    open_store,
    s3_bucket_and_prefix,
    translated,
)

log = logging.getLogger("conveyor.storage")

# Objects larger than this are uploaded in parts of this size (S3's multipart upload, reported as
# CompleteMultipartUpload); smaller ones in one request (PutObject).
MULTIPART_THRESHOLD = 8 * 1024 * 1024
PART_SIZE = 8 * 1024 * 1024
# An object of a local bucket this small keeps its bytes in its row of the catalog (storage.db)
# rather than a file: one flushed commit instead of three flushes (file, directory, row).
INLINE_LIMIT = 32 * 1024
READ_CHUNK = 1024 * 1024
MAX_AGE_SECONDS = 100 * 365 * 86400
# Bytes with no metadata row this old are a put that died before its commit (a put commits right
# after its bytes are flushed).
ORPHAN_AGE_SECONDS = 3600.0
# Directories a PostgreSQL deployment (or a tenant through the server) may keep buckets in: the
# operator declares them shared (an NFS mount every node sees, say), comma-separated.
SHARED_DIRECTORIES_VARIABLE = "CONVEYOR_SHARED_BUCKET_DIRECTORIES"
# A fault hook for the crash tests: "after-commit" kills the process with SIGKILL between an
# object row's commit and the sending of its notifications.
FAULT_VARIABLE = "CONVEYOR_STORAGE_FAULT"

Data = bytes | bytearray | memoryview | IO[bytes] | Iterable[bytes]


def open_storage(deployment: Deployment, clock: Clock, engine: Engine) -> StorageService:
    """The storage of ``deployment``; ``engine`` sends the notifications."""
    db = open_catalog_database(deployment)
    if db is None:
        raise InvalidBucketLocation(
            "buckets are not available through a server connection yet; connect to its SQLite or PostgreSQL URL"
        )
    return StorageService(deployment, Catalog(db, clock), engine)


def shared_directories() -> list[str]:
    text = os.environ.get(SHARED_DIRECTORIES_VARIABLE, "")
    return [os.path.normpath(p.strip()) for p in text.split(",") if p.strip()]


class StorageService:
    def __init__(self, deployment: Deployment, catalog: Catalog, engine: Engine) -> None:
        self.deployment = deployment
        self.catalog = catalog
        self.engine = engine
        self._stores: dict[tuple[str, str], tuple[BucketConfig, Any]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self.catalog.db.close()

    @property
    def clock(self) -> Clock:
        return self.catalog.clock

    # -- buckets ------------------------------------------------------------------------------
    def create_bucket(
        self,
        account: str,
        name: str,
        *,
        url: str | None = None,
        endpoint: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        egress: EgressPolicy | None = None,
    ) -> BucketInfo:
        """Register a bucket. ``egress``: the server's policy for a tenant's endpoint (None when
        embedded)."""
        check_bucket_name(name)
        config = self._configure(account, name, url, endpoint, region, access_key_id, secret_access_key, egress)
        store = open_store(config)
        if config.location == "s3":
            check_reachable(store, config)
        info = self.catalog.create_bucket(account, name, config)
        with self._lock:
            self._stores[(account, name)] = (config, store)
        return info

    def _configure(
        self,
        account: str,
        name: str,
        url: str | None,
        endpoint: str | None,
        region: str | None,
        key_id: str | None,
        secret: str | None,
        egress: EgressPolicy | None,
    ) -> BucketConfig:
        for label, value in (("endpoint", endpoint), ("region", region), ("access_key_id", key_id)):
            if value is not None and (not isinstance(value, str) or len(value) > 1024):
                raise InvalidBucketLocation(f"{label} must be a string of at most 1024 characters")
        if url is None:
            if any(v is not None for v in (endpoint, region, key_id, secret)):
                raise InvalidBucketLocation("endpoint, region and credentials need an s3:// url")
            if self.deployment.kind != "sqlite":
                raise InvalidBucketLocation(
                    "a PostgreSQL deployment keeps buckets in an S3-compatible service "
                    "(url='s3://bucket/prefix', endpoint=...) or in a shared directory (url='file:///dir', "
                    f"declared in ${SHARED_DIRECTORIES_VARIABLE})"
                )
            return BucketConfig("local", directory=self._local_directory(account, name))
        if not isinstance(url, str):
            raise InvalidBucketLocation(f"bucket url must be a string, not {type(url).__name__}")
        if url.startswith("file:"):
            if any(v is not None for v in (endpoint, region, key_id, secret)):
                raise InvalidBucketLocation("a file:// bucket takes no endpoint, region or credentials")
            directory = file_directory(url)
            if self.deployment.kind != "sqlite" or egress is not None:
                shared = shared_directories()
                if not any(directory == d or directory.startswith(d.rstrip("/") + "/") for d in shared):
                    raise InvalidBucketLocation(
                        f"directory {directory!r} is not declared shared: the operator lists the directories "
                        f"every process of this deployment sees in ${SHARED_DIRECTORIES_VARIABLE} "
                        f"(now {','.join(shared) or 'empty'})"
                    )
            return BucketConfig("file", url=url, directory=directory)
        s3_bucket_and_prefix(url)
        if (key_id is None) != (secret is None):
            raise InvalidBucketLocation("give both access_key_id and secret_access_key, or neither")
        if secret is not None and not isinstance(secret, str):
            raise InvalidBucketLocation("secret_access_key must be a string")
        if endpoint is not None:
            if not endpoint.startswith(("http://", "https://")):
                raise InvalidBucketLocation(f"endpoint {endpoint!r} must be an http:// or https:// URL")
            check_url(endpoint, egress)
        elif egress is not None:
            region_name = region or "us-east-1"
            check_url(f"https://s3.{region_name}.amazonaws.com", egress)
        return BucketConfig("s3", url, endpoint or "", region or "", key_id or "", secret or "")

    def _local_directory(self, account: str, name: str) -> str:
        return str(Path(self.deployment.location) / "buckets" / account / name)

    def bucket(self, account: str, name: str) -> BucketInfo:
        check_bucket_name(name)
        return self.catalog.bucket(account, name)[0]

    def list_buckets(self, account: str) -> list[BucketInfo]:
        return self.catalog.list_buckets(account)

    def delete_bucket(self, account: str, name: str) -> None:
        check_bucket_name(name)
        self.catalog.delete_bucket(account, name)
        with self._lock:
            self._stores.pop((account, name), None)

    def store(self, account: str, bucket: str) -> tuple[BucketConfig, Any]:
        with self._lock:
            found = self._stores.get((account, bucket))
        if found is not None:
            return found
        _, row = self.catalog.bucket(account, bucket)
        directory = self._local_directory(account, bucket) if row[1] == "local" else ""
        config = self.catalog.config(row, directory)
        if config.location == "file":
            config = BucketConfig("file", url=config.url, directory=file_directory(config.url))
        found = (config, open_store(config))
        with self._lock:
            self._stores[(account, bucket)] = found
        return found

    # -- objects ------------------------------------------------------------------------------
    def put(
        self,
        account: str,
        bucket: str,
        key: str,
        data: Data,
        *,
        content_type: str,
        metadata: dict[str, str],
        only_if_absent: bool,
    ) -> ObjectInfo:
        config, store = self.store(account, bucket)
        local = config.location == "local"
        if local:
            check_local_key(key)  # every key of a local bucket could be a file's path, whatever its size
        if only_if_absent and self.catalog.get_object(account, bucket, key) is not None:
            raise ObjectExists(f"object {key!r} already exists in bucket {bucket!r} (only_if_absent)")
        body = _Hashing(data)
        head = body.read_head(MULTIPART_THRESHOLD + 1)
        if local and body.exhausted and len(head) <= INLINE_LIMIT:
            return self._put_inline(
                account, bucket, key, head, body.sha256.hexdigest(), content_type, metadata, only_if_absent
            )
        if local:
            self.catalog.clash(account, bucket, key)
        if config.location != "s3":
            self._check_local_path(config, key)
        created = missing_directories(config.directory, key) if config.location != "s3" else []
        multipart = len(head) > MULTIPART_THRESHOLD and not only_if_absent
        what = f"put {shown(key)} into bucket {bucket!r}"
        if multipart:
            result = translated(
                config,
                what,
                lambda: obstore.put(
                    store, key, body.chunks(head), use_multipart=True, chunk_size=PART_SIZE, max_concurrency=4
                ),
            )
        else:
            if not body.exhausted:
                head = head + b"".join(body.chunks(b""))
            mode: Literal["create", "overwrite"] = "create" if only_if_absent else "overwrite"
            result = translated(config, what, lambda: obstore.put(store, key, head, mode=mode, use_multipart=False))
        sha256 = body.sha256.hexdigest()
        if config.location != "s3":
            translated(config, what, lambda: fsync_local(config.directory, key, created))
            etag = sha256[:32]
        else:
            etag = (result.get("e_tag") or sha256[:32]).strip('"')
        info = ObjectInfo(key, body.size, etag, from_ms(self.clock.now_ms()), sha256, content_type, metadata)
        action: Action = "CompleteMultipartUpload" if multipart else "PutObject"
        event = Event(action, key, info.size, info.etag)
        queued, _ = self.catalog.record_object(account, bucket, info, event, only_if_absent=only_if_absent, local=local)
        self._after_commit(queued)
        return info

    def _put_inline(
        self,
        account: str,
        bucket: str,
        key: str,
        data: bytes,
        sha256: str,
        content_type: str,
        metadata: dict[str, str],
        only_if_absent: bool,
    ) -> ObjectInfo:
        """A small object of a local bucket: its bytes go into its row, so one flushed commit stores
        it (bytes, metadata and notifications together) and one read returns it."""
        info = ObjectInfo(key, len(data), sha256[:32], from_ms(self.clock.now_ms()), sha256, content_type, metadata)
        event = Event("PutObject", key, info.size, info.etag)
        queued, replaced_file = self.catalog.record_object(
            account, bucket, info, event, only_if_absent=only_if_absent, local=True, data=data
        )
        if replaced_file:
            self._delete_file(account, bucket, key)
        self._after_commit(queued)
        return info

    def _delete_file(self, account: str, bucket: str, key: str) -> None:
        """Delete the bytes of an object whose row is gone or no longer names them; a crash before
        this leaves a file that the ``storage-orphans`` sweep deletes."""
        config, store = self.store(account, bucket)
        with contextlib.suppress(ObjectNotFound):
            translated(config, f"delete {shown(key)}", lambda: obstore.delete(store, key))

    @staticmethod
    def _check_local_path(config: BucketConfig, key: str) -> None:
        """A directory cannot hold a file "a" and a file "a/b": refuse the key that would need both."""
        check_local_key(key)
        root = Path(config.directory)
        path = root / key
        if path.is_dir() and not _remove_if_empty(path):
            raise InvalidObjectKey(
                f"object key {shown(key)}: {shown(key)} holds other objects (keys below it) in this local bucket"
            )
        for parent in path.parents:
            if parent == root or root not in parent.parents:
                break
            if parent.is_file():
                name = parent.relative_to(root).as_posix()
                raise InvalidObjectKey(
                    f"object key {shown(key)}: {name!r} is an object, so a local bucket cannot hold keys below it"
                )

    def head(self, account: str, bucket: str, key: str) -> ObjectInfo:
        self.store(account, bucket)
        info = self.catalog.get_object(account, bucket, key)
        if info is None:
            raise ObjectNotFound(f"bucket {bucket!r} has no object {key!r}")
        return info

    def get(self, account: str, bucket: str, key: str, byte_range: tuple[int, int] | None) -> tuple[ObjectInfo, Any]:
        """The object's metadata and a reader of its bytes (``bytes()``, ``stream()``), or None when
        the range holds none of them."""
        config, store = self.store(account, bucket)
        found = self.catalog.read_object(account, bucket, key)
        if found is None:
            raise ObjectNotFound(f"bucket {bucket!r} has no object {key!r}")
        info, data = found
        start, end = (0, info.size) if byte_range is None else (byte_range[0], min(byte_range[1], info.size))
        if start >= end:  # an empty object, or nothing of it in the range
            return info, None
        if data is not None:
            return info, InlineBytes(data[start:end])
        options: dict[str, Any] = {} if byte_range is None else {"range": (start, end)}
        what = f"get {key!r} from bucket {bucket!r}"
        return info, translated(config, what, lambda: obstore.get(store, key, options=options))  # type: ignore[arg-type]

    def get_nowait(self, account: str, bucket: str, key: str) -> tuple[ObjectInfo, InlineBytes | None] | None:
        """:meth:`get` of a whole object whose bytes are in its row, read without waiting
        (:meth:`~conveyor.engine.tables.Tables.read_nowait`); None when that would wait: its bytes
        in a file or S3, the catalog on PostgreSQL or busy, the bucket not opened by a read yet."""
        with self._lock:
            if (account, bucket) not in self._stores:
                return None
        try:
            found = self.catalog.read_object(account, bucket, key, wait=False)
        except WouldWait:
            return None
        if found is None:
            raise ObjectNotFound(f"bucket {bucket!r} has no object {key!r}")
        info, data = found
        if info.size == 0:
            return info, None
        return None if data is None else (info, InlineBytes(data))

    def delete(self, account: str, bucket: str, keys: list[str], action: Action = "DeleteObject") -> list[ObjectInfo]:
        self.store(account, bucket)
        removed, queued = self.catalog.remove_objects(account, bucket, keys, action)
        for info, in_file in removed:
            if in_file:
                self._delete_file(account, bucket, info.key)
        self._after_commit(queued)
        return [info for info, _ in removed]

    def copy(self, account: str, bucket: str, source: str, destination: str) -> ObjectInfo:
        config, store = self.store(account, bucket)
        found = self.catalog.read_object(account, bucket, source)
        if found is None:
            raise ObjectNotFound(f"bucket {bucket!r} has no object {source!r}")
        original, data = found
        local = config.location == "local"
        if data is None:
            if local:
                self.catalog.clash(account, bucket, destination)
            if config.location != "s3":
                self._check_local_path(config, destination)
            created = missing_directories(config.directory, destination) if config.location != "s3" else []
            what = f"copy {source!r} to {destination!r}"
            translated(config, what, lambda: obstore.copy(store, source, destination))
            if config.location != "s3":
                translated(config, what, lambda: fsync_local(config.directory, destination, created))
        info = dataclasses.replace(original, key=destination, uploaded=from_ms(self.clock.now_ms()))
        event = Event("CopyObject", destination, info.size, info.etag, (bucket, source))
        queued, replaced_file = self.catalog.record_object(
            account, bucket, info, event, only_if_absent=False, local=local, data=data
        )
        if replaced_file and data is not None:
            self._delete_file(account, bucket, destination)
        self._after_commit(queued)
        return info

    def list_objects(self, account: str, bucket: str, prefix: str, start_after: str) -> Iterator[ObjectInfo]:
        self.store(account, bucket)
        check_prefix(prefix)
        check_prefix(start_after, "start_after")
        after = start_after
        while True:
            page = self.catalog.list_objects(account, bucket, prefix, after, catalog_module.PAGE)
            yield from page
            if len(page) < catalog_module.PAGE:
                return
            after = page[-1].key

    def exists(self, account: str, bucket: str, key: str) -> bool:
        self.store(account, bucket)
        return self.catalog.get_object(account, bucket, key) is not None

    # -- notifications ------------------------------------------------------------------------
    def notifications(self, account: str, bucket: str) -> list[NotificationRule]:
        self.store(account, bucket)
        return self.catalog.rules(account, bucket)

    def remove_notification(self, account: str, bucket: str, rule_id: str) -> None:
        self.catalog.remove_rule(account, bucket, rule_id)

    def lifecycle_rules(self, account: str, bucket: str) -> list[LifecycleRule]:
        self.store(account, bucket)
        return self.catalog.lifecycle_rules(account, bucket)

    def remove_lifecycle_rule(self, account: str, bucket: str, rule_id: str) -> None:
        self.catalog.remove_lifecycle_rule(account, bucket, rule_id)

    def add_notification(
        self,
        account: str,
        bucket: str,
        queue_id: str,
        queue_name: str,
        actions: Any,
        prefix: Any,
        suffix: Any,
        description: Any,
    ) -> NotificationRule:
        self.store(account, bucket)
        chosen, prefix, suffix, description = check_rule(actions, prefix, suffix, description)
        now = self.clock.now_ms()
        rule = NotificationRule(
            ordered_id(now), queue_name, queue_id, chosen, prefix, suffix, description, from_ms(now)
        )

        def check(existing: list[NotificationRule]) -> None:
            if len(existing) >= MAX_RULES_PER_BUCKET:
                raise InvalidNotificationRule(
                    f"bucket {bucket!r} has {len(existing)} notification rules; the limit is {MAX_RULES_PER_BUCKET}"
                )
            for other in existing:
                if other.queue_id == queue_id and overlaps(other, chosen, prefix, suffix):
                    raise InvalidNotificationRule(
                        f"rule overlaps rule {other.rule_id} for queue {queue_name!r} (actions "
                        f"{', '.join(other.actions)}, prefix {other.prefix!r}, suffix {other.suffix!r}): one "
                        "write would be reported twice"
                    )

        return self.catalog.add_rule(account, bucket, rule, check)

    def _after_commit(self, queued: list[tuple[str, str, str]]) -> None:
        if not queued:
            return
        if os.environ.get(FAULT_VARIABLE) == "after-commit":
            os.kill(os.getpid(), signal.SIGKILL)
        traceparent = tracing.current_traceparent()  # the write's trace goes on with its message
        for event_id, queue_id, body in queued:
            self._send(event_id, queue_id, body, traceparent)

    def _send(self, event_id: str, queue_id: str, body: str, traceparent: str | None = None) -> bool:
        try:
            self.engine.enqueue(queue_id, [NewMessage(body.encode(), "json", None, traceparent)])
        except ConveyorError as exc:
            log.warning("notification %s to queue %s not sent yet (%s); the outbox keeps it", event_id, queue_id, exc)
            return False
        self.catalog.event_sent(event_id)
        return True

    def send_pending(self, older_than_ms: int = 0, limit: int = 1000) -> int:
        """Send outbox rows at least ``older_than_ms`` old (the coordinator's sweep); returns how
        many were sent. A notification to a deleted queue is dropped with a warning."""
        sent = 0
        before = self.clock.now_ms() - older_than_ms
        for event_id, _account, queue_id, body in self.catalog.pending_events(before, limit):
            try:
                self.engine.get_queue_by_id(queue_id)
            except QueueNotFound:
                log.warning("dropping notification %s: its queue %s no longer exists", event_id, queue_id)
                self.catalog.event_sent(event_id)
                continue
            sent += self._send(event_id, queue_id, body)
        return sent

    # -- orphans ------------------------------------------------------------------------------
    def sweep_orphans(self, older_than_seconds: float = ORPHAN_AGE_SECONDS) -> int:
        """Delete the files of the deployment's own (``local``) buckets that no object row names (or
        whose row holds the bytes itself) and that are older than ``older_than_seconds``: bytes of
        puts that died before their commit, or of objects replaced by small ones that died before
        deleting them.
        A ``file://`` directory is left alone (other programs may keep files there). Returns how
        many files were deleted."""
        if self.deployment.kind != "sqlite":
            return 0
        cutoff = self.clock.now_ms() / 1000 - older_than_seconds
        swept = 0
        for account_dir in sorted((Path(self.deployment.location) / "buckets").glob("*")):
            for info in self.catalog.list_buckets(account_dir.name):
                if info.location != "local":
                    continue
                root = Path(self._local_directory(account_dir.name, info.name))
                for key, modified in _files(root):
                    if modified < cutoff and not self.catalog.in_file(account_dir.name, info.name, key):
                        with contextlib.suppress(FileNotFoundError):
                            (root / key).unlink()
                            swept += 1
        if swept:
            log.info("removed %d orphan file(s) left by puts that did not commit", swept)
        return swept

    # -- lifecycle ----------------------------------------------------------------------------
    def add_lifecycle_rule(self, account: str, bucket: str, prefix: Any, max_age_seconds: Any) -> LifecycleRule:
        self.store(account, bucket)
        check_prefix(prefix)
        if (
            isinstance(max_age_seconds, bool)
            or not isinstance(max_age_seconds, int)
            or not 1 <= max_age_seconds <= MAX_AGE_SECONDS
        ):
            raise InvalidLifecycleRule(
                f"max_age_seconds must be a whole number from 1 to {MAX_AGE_SECONDS}, not {max_age_seconds!r}"
            )
        now = self.clock.now_ms()
        rule = LifecycleRule(ordered_id(now), prefix, max_age_seconds, from_ms(now))
        return self.catalog.add_lifecycle_rule(account, bucket, rule)

    def expire(self, limit: int = 1000) -> int:
        """Delete every object older than a lifecycle rule of its bucket allows (``LifecycleDeletion``);
        returns how many were deleted."""
        deleted = 0
        now = self.clock.now_ms()
        for account, bucket, rule in self.catalog.all_lifecycle_rules():
            cutoff = now - rule.max_age_seconds * 1000
            while True:
                expired = self.catalog.expired_objects(account, bucket, rule.prefix, cutoff, limit)
                if not expired:
                    break
                try:
                    removed = self.delete(account, bucket, [o.key for o in expired], "LifecycleDeletion")
                except BucketNotFound:
                    break
                deleted += len(removed)
                if len(expired) < limit:
                    break
        return deleted


def _files(root: Path) -> Iterator[tuple[str, float]]:
    """(key, modification time) of every file under ``root``."""
    for directory, _, names in os.walk(root):
        for name in names:
            path = Path(directory) / name
            with contextlib.suppress(FileNotFoundError):
                yield path.relative_to(root).as_posix(), path.stat().st_mtime


class InlineBytes:
    """The bytes of an object read from its row, with the two methods an obstore read has."""

    def __init__(self, data: builtins.bytes) -> None:
        self._data = data

    def bytes(self) -> builtins.bytes:
        return self._data

    def stream(self, min_chunk_size: int = 64 * 1024) -> Iterator[builtins.bytes]:
        for start in range(0, len(self._data), min_chunk_size):
            yield self._data[start : start + min_chunk_size]


class _Hashing:
    """The bytes of a put, read once: counted and hashed (SHA-256) as they pass."""

    def __init__(self, data: Data) -> None:
        self.sha256 = hashlib.sha256()
        self.size = 0
        self.exhausted = False
        if isinstance(data, bytes | bytearray | memoryview):
            self._source: Iterator[bytes] = iter([bytes(data)])
        elif hasattr(data, "read"):
            reader: Callable[[int], bytes] = data.read
            self._source = iter(lambda: reader(READ_CHUNK), b"")
        elif isinstance(data, str):
            raise TypeError("put takes bytes, a binary file or an iterator of bytes; encode text first")
        else:
            self._source = iter(data)

    def _next(self) -> bytes | None:
        for chunk in self._source:
            if not isinstance(chunk, bytes | bytearray | memoryview):
                raise TypeError(f"put's data gave a {type(chunk).__name__}; it must give bytes")
            chunk = bytes(chunk)
            if chunk:
                self.sha256.update(chunk)
                self.size += len(chunk)
                return chunk
        self.exhausted = True
        return None

    def read_head(self, limit: int) -> bytes:
        parts: list[bytes] = []
        total = 0
        while total < limit:
            chunk = self._next()
            if chunk is None:
                break
            parts.append(chunk)
            total += len(chunk)
        return b"".join(parts)

    def chunks(self, head: bytes) -> Iterator[bytes]:
        if head:
            yield head
        while (chunk := self._next()) is not None:
            yield chunk


def _remove_if_empty(directory: Path) -> bool:
    """Remove ``directory`` if no file is left below it (only the directories of deleted keys, which
    a delete leaves behind); True if it is gone, False if it holds an object."""
    for below, _, files in os.walk(directory, topdown=False):
        if files:
            return False
        try:
            os.rmdir(below)
        except OSError:  # a put made something there meanwhile: it holds an object now
            return False
    return True
