"""A job's source and target as the pipeline sees them: a source lists pages of keys and opens an
object as a stream of chunks; a target says whether (and since when) it holds a key and writes a
stream. Each is a Conveyor bucket of the job's account (``vendor: "r2"``) or a bucket of any
S3-compatible service (``vendor: "s3"``, :mod:`conveyor.slurper.s3`).

>>> source = open_source(cv, job.source)
>>> page, done = source.list_page(after="", limit=1000)
>>> with source.open(page[0].key) as (meta, chunks):
...     target.write(page[0].key, chunks, size=meta.size, content_type=meta.content_type, metadata=meta.metadata)
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import itertools
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

from conveyor.egress import EgressPolicy, check_url
from conveyor.slurper.errors import ChecksumMismatch
from conveyor.slurper.model import Endpoint
from conveyor.slurper.s3 import S3Client
from conveyor.slurper.store import Listed
from conveyor.storage.errors import ObjectNotFound

if TYPE_CHECKING:
    from conveyor.client.sync import Conveyor
    from conveyor.storage import Bucket

# An S3 target takes objects above this in parts of PART_SIZE (S3's minimum part is 5 MiB), or
# larger ones (whole MiB) for an object that would need more than MAX_PARTS of them.
MULTIPART_THRESHOLD = 16 * 1024 * 1024
PART_SIZE = 8 * 1024 * 1024
MAX_PARTS = 10_000
MIB = 1024 * 1024


_MD5 = re.compile(r"^[0-9a-fA-F]{32}\Z")  # an etag that is the MD5 of the bytes (not multipart)


@dataclasses.dataclass(frozen=True)
class ObjectMeta:
    size: int
    etag: str
    content_type: str | None
    metadata: Mapping[str, str]


@dataclasses.dataclass(frozen=True)
class Existing:
    """An object the target already holds: when it was written (epoch seconds), its size, and its
    etag (an MD5 only where the target is an S3 service: a Conveyor bucket's etag is its own)."""

    written_at: float
    size: int
    md5: str = ""


Opened = AbstractContextManager[tuple[ObjectMeta, Iterator[bytes]]]


class Source(ABC):
    @abstractmethod
    def list_page(self, after: str, limit: int) -> tuple[list[Listed], bool]:
        """Up to ``limit`` keys after ``after`` in key order; True when nothing follows them."""

    @abstractmethod
    def open(self, key: str) -> Opened:
        """The object at ``key``: its metadata and its bytes in chunks (``ObjectNotFound`` if none)."""

    @abstractmethod
    def close(self) -> None:
        """Release the endpoint's connections."""


class Target(ABC):
    @abstractmethod
    def existing(self, key: str) -> Existing | None:
        """What the target holds at ``key``, or None."""

    @abstractmethod
    def write(
        self,
        key: str,
        chunks: Iterator[bytes],
        *,
        size: int,
        content_type: str | None,
        metadata: Mapping[str, str],
        md5: str | None = None,
    ) -> int:
        """Write the object; the number of bytes the target now holds at ``key``. ``md5``: the
        source's MD5 of the bytes (hex), where it has one; a target whose :meth:`checks_md5` is
        true for ``size`` refuses bytes that do not match it."""

    def checks_md5(self, size: int) -> bool:
        """Whether :meth:`write` verifies an object of ``size`` bytes against the source's MD5
        itself (so the caller need not hash the bytes)."""
        return False

    @abstractmethod
    def close(self) -> None:
        """Release the endpoint's connections."""


def _keys_page(keys: tuple[str, ...], after: str, limit: int) -> tuple[list[Listed], bool]:
    start = bisect.bisect_right(keys, after) if after else 0
    page = keys[start : start + limit]
    return [Listed(k, -1) for k in page], start + limit >= len(keys)


class S3Source(Source):
    def __init__(self, spec: Endpoint) -> None:
        self.spec = spec
        self.client = S3Client(spec.endpoint, spec.region, spec.access_key_id, spec.secret_access_key)

    def list_page(self, after: str, limit: int) -> tuple[list[Listed], bool]:
        if self.spec.keys is not None:
            return _keys_page(self.spec.keys, after, limit)
        page = self.client.list_page(self.spec.bucket, prefix=self.spec.path_prefix, start_after=after, max_keys=limit)
        listed = [Listed(o.key, o.size, o.etag, o.storage_class) for o in page.objects]
        return listed, not page.truncated or not listed

    @contextmanager
    def _open(self, key: str) -> Iterator[tuple[ObjectMeta, Iterator[bytes]]]:
        with self.client.get(self.spec.bucket, key) as (head, chunks):
            yield ObjectMeta(head.size, head.etag, head.content_type, head.metadata), chunks

    def open(self, key: str) -> Opened:
        return self._open(key)

    def close(self) -> None:
        self.client.close()


class BucketSource(Source):
    def __init__(self, spec: Endpoint, bucket: Bucket) -> None:
        self.spec = spec
        self.bucket = bucket

    def list_page(self, after: str, limit: int) -> tuple[list[Listed], bool]:
        if self.spec.keys is not None:
            return _keys_page(self.spec.keys, after, limit)
        found = list(itertools.islice(self.bucket.list(prefix=self.spec.path_prefix, start_after=after), limit + 1))
        return [Listed(o.key, o.size, o.etag) for o in found[:limit]], len(found) <= limit

    @contextmanager
    def _open(self, key: str) -> Iterator[tuple[ObjectMeta, Iterator[bytes]]]:
        body = self.bucket.get(key)
        info = body.info
        yield ObjectMeta(info.size, info.etag, info.content_type, info.metadata), iter(body)

    def open(self, key: str) -> Opened:
        return self._open(key)

    def close(self) -> None:
        """A Conveyor bucket holds no connection of its own."""


class BucketTarget(Target):
    def __init__(self, bucket: Bucket) -> None:
        self.bucket = bucket

    def existing(self, key: str) -> Existing | None:
        try:
            info = self.bucket.head(key)
        except ObjectNotFound:
            return None
        return Existing(info.uploaded.timestamp(), info.size)

    def write(
        self,
        key: str,
        chunks: Iterator[bytes],
        *,
        size: int,
        content_type: str | None,
        metadata: Mapping[str, str],
        md5: str | None = None,
    ) -> int:
        return self.bucket.put(key, chunks, content_type=content_type, metadata=dict(metadata)).size

    def close(self) -> None:
        """A Conveyor bucket holds no connection of its own."""


class S3Target(Target):
    def __init__(self, spec: Endpoint) -> None:
        self.spec = spec
        self.client = S3Client(spec.endpoint, spec.region, spec.access_key_id, spec.secret_access_key)

    def existing(self, key: str) -> Existing | None:
        head = self.client.head(self.spec.bucket, key)
        if head is None:
            return None
        return Existing(head.last_modified.timestamp() if head.last_modified is not None else 0.0, head.size, head.etag)

    def checks_md5(self, size: int) -> bool:
        """A single PUT's reply says the MD5 of what the service received (its etag); a multipart
        upload's parts have no MD5 the source gave."""
        return size <= MULTIPART_THRESHOLD

    def write(
        self,
        key: str,
        chunks: Iterator[bytes],
        *,
        size: int,
        content_type: str | None,
        metadata: Mapping[str, str],
        md5: str | None = None,
    ) -> int:
        if size <= MULTIPART_THRESHOLD:
            data = b"".join(chunks)
            if len(data) != size:  # the MD5 is of the size the source said: the caller refuses a short read
                md5 = None
            etag = self.client.put(self.spec.bucket, key, data, content_type=content_type, metadata=metadata, md5=md5)
            # A single PUT's etag is the MD5 of the bytes the service received (services check the
            # Content-MD5 sent, or not: moto does not). Only an etag of another kind (encrypted
            # with KMS, say) leaves the hashing to this side.
            if md5 is not None and etag.lower() != md5.lower():
                if not _MD5.match(etag) and hashlib.md5(data, usedforsecurity=False).hexdigest() == md5.lower():
                    return len(data)
                raise ChecksumMismatch(f"{key!r}: the target's etag {etag} is not the source's MD5 {md5}")
            return len(data)
        written = 0

        def parts() -> Iterator[bytes]:
            nonlocal written
            pending: list[bytes] = []
            held = 0
            for chunk in chunks:
                pending.append(chunk)
                held += len(chunk)
                if held >= part:
                    data = b"".join(pending)
                    while len(data) >= part:
                        written += part
                        yield data[:part]
                        data = data[part:]
                    pending, held = [data], len(data)
            if held or not written:
                written += held
                yield b"".join(pending)

        part = part_size(size)
        self.client.put_multipart(self.spec.bucket, key, parts(), content_type=content_type, metadata=metadata)
        return written

    def close(self) -> None:
        self.client.close()


def part_size(size: int) -> int:
    """The part size of a multipart upload of ``size`` bytes: PART_SIZE, or the whole MiB that keeps
    it within MAX_PARTS parts."""
    return max(PART_SIZE, -(-size // (MAX_PARTS * MIB)) * MIB)


def open_source(cv: Conveyor, spec: Endpoint) -> Source:
    return S3Source(spec) if spec.vendor == "s3" else BucketSource(spec, cv.bucket(spec.bucket))


def open_target(cv: Conveyor, spec: Endpoint) -> Target:
    return S3Target(spec) if spec.vendor == "s3" else BucketTarget(cv.bucket(spec.bucket))


def check_egress(spec: Endpoint, policy: EgressPolicy | None) -> None:
    """Refuse an S3 endpoint the operator's egress policy does not allow (``None``: embedded use)."""
    if spec.vendor == "s3":
        check_url(spec.endpoint or f"https://s3.{spec.region or 'us-east-1'}.amazonaws.com", policy)


def precheck_source(cv: Conveyor, spec: Endpoint) -> None:
    """One listing request (a HEAD of the first key for a ``keys`` source is not needed: listing
    proves the bucket and the credentials); raises the storage error that says what is wrong."""
    source = open_source(cv, spec)
    try:
        if isinstance(source, S3Source):
            source.client.list_page(spec.bucket, prefix=spec.path_prefix, start_after="", max_keys=1)
    finally:
        source.close()


def precheck_target(cv: Conveyor, spec: Endpoint) -> None:
    target = open_target(cv, spec)
    try:
        if isinstance(target, S3Target):
            target.client.list_page(spec.bucket, prefix="", start_after="", max_keys=1)
    finally:
        target.close()
