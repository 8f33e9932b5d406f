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
import concurrent.futures
import dataclasses
import itertools
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

from conveyor.egress import EgressPolicy, check_url
from conveyor.errors import InvalidRequest
from conveyor.slurper.errors import ChecksumMismatch
from conveyor.slurper.model import Endpoint
from conveyor.slurper.s3 import S3Client
from conveyor.slurper.store import Listed
from conveyor.storage.errors import ObjectNotFound

if TYPE_CHECKING:
    from conveyor.client.sync import Conveyor
    from conveyor.storage import Bucket

# An S3 target takes an object of up to MULTIPART_THRESHOLD bytes in one PUT, streamed as it is read
# from the source, and a larger one as a multipart upload of PART_SIZE parts (S3's minimum part is
# 5 MiB; larger parts, in whole MiB, for an object that would need more than MAX_PARTS of them),
# several parts uploading at once. Why 128 MiB and not less: a single PUT is what the peers send for
# these sizes (s5cmd 2.3 below its 50 MiB part size, rclone 1.60 below its 200 MiB
# --s3-upload-cutoff), it holds one chunk in memory where a multipart upload holds several parts,
# the target's etag of it is the MD5 of what it received (so nothing is hashed here), and it costs
# the service one request where a multipart upload costs three and more, and, on moto, half as much
# CPU per byte again to receive and join the parts (10-13 s per GB against 6-7 s, 2026-12-04).
# Above it, parts in parallel are what make one large object fast, a failure costs one part and not
# the whole object, and S3 refuses a single PUT over 5 GiB. A worker's ``multipart_threshold`` and
# ``part_size`` change both (``conveyor slurper worker --multipart-threshold --part-size``).
MULTIPART_THRESHOLD = 128 * 1024 * 1024
PART_SIZE = 8 * 1024 * 1024
MIN_PART_SIZE = 5 * 1024 * 1024
MAX_PUT_BYTES = 5 * 1024**3  # S3's largest single PUT, and its largest part
MAX_PARTS = 10_000
MIB = 1024 * 1024


log = logging.getLogger("conveyor.slurper")
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
        verify: bool = False,
    ) -> int:
        """Write the object; the number of bytes the target now holds at ``key``. ``md5``: the
        source's MD5 of the bytes (hex), where it has one; with ``verify`` (the caller does not
        hash the bytes: :meth:`checks_md5` said the target checks them) a target refuses bytes that
        do not match it, and leaves nothing at ``key``."""

    def checks_md5(self, size: int) -> bool:
        """Whether :meth:`write` verifies an object of ``size`` bytes against the source's MD5
        itself (so the caller need not hash the bytes)."""
        return False

    @abstractmethod
    def discard(self, key: str) -> None:
        """Remove ``key`` (a copy that failed its check after it was written): a retry then finds
        nothing there to take for an earlier delivery's copy."""

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
        verify: bool = False,
    ) -> int:
        return self.bucket.put(key, chunks, content_type=content_type, metadata=dict(metadata)).size

    def discard(self, key: str) -> None:
        self.bucket.delete(key)

    def close(self) -> None:
        """A Conveyor bucket holds no connection of its own."""


class S3Target(Target):
    def __init__(
        self, spec: Endpoint, *, multipart_threshold: int = MULTIPART_THRESHOLD, part_size: int = PART_SIZE
    ) -> None:
        self.spec = spec
        self.multipart_threshold = multipart_threshold
        self.part_size = part_size
        self.client = S3Client(spec.endpoint, spec.region, spec.access_key_id, spec.secret_access_key)
        # Whether a single PUT's etag is the MD5 of the bytes (true of S3 and its kin, not of SSE-KMS
        # on AWS, say): once a PUT answers another kind, the caller hashes the bytes instead.
        self.etags_are_md5 = True

    def existing(self, key: str) -> Existing | None:
        head = self.client.head(self.spec.bucket, key)
        if head is None:
            return None
        return Existing(head.last_modified.timestamp() if head.last_modified is not None else 0.0, head.size, head.etag)

    def checks_md5(self, size: int) -> bool:
        """A single PUT's reply says the MD5 of what the service received (its etag); a multipart
        upload's parts have no MD5 the source gave."""
        return self.etags_are_md5 and size <= self.multipart_threshold

    def write(
        self,
        key: str,
        chunks: Iterator[bytes],
        *,
        size: int,
        content_type: str | None,
        metadata: Mapping[str, str],
        md5: str | None = None,
        verify: bool = False,
    ) -> int:
        if size <= self.multipart_threshold:
            return self._put(
                key, chunks, size=size, content_type=content_type, metadata=metadata, md5=md5, verify=verify
            )
        written = 0

        def parts() -> Iterator[list[bytes]]:
            # Each part as the chunks read, not joined into one buffer (only a chunk that straddles
            # two parts is cut): the upload streams them as it streams a single PUT's.
            nonlocal written
            pending: list[bytes] = []
            held = 0
            for chunk in chunks:
                while held + len(chunk) >= part:
                    cut = part - held
                    pending.append(chunk[:cut])
                    written += part
                    yield pending
                    chunk = chunk[cut:]
                    pending, held = [], 0
                if chunk:
                    pending.append(chunk)
                    held += len(chunk)
            if held or not written:
                written += held
                yield pending

        part = part_size(size, self.part_size)
        self.client.put_multipart(self.spec.bucket, key, parts(), content_type=content_type, metadata=metadata)
        return written

    def _put(
        self,
        key: str,
        chunks: Iterator[bytes],
        *,
        size: int,
        content_type: str | None,
        metadata: Mapping[str, str],
        md5: str | None,
        verify: bool,
    ) -> int:
        """One PUT of ``size`` bytes, streamed from the source's chunks as they arrive. A source
        that gives fewer or more bytes than it said fails the PUT before its last chunk is sent (each
        chunk is sent once the next one is read, so the service never has the whole length: it
        stores nothing); a source that fails mid-stream fails it with the source's error."""
        sent = 0
        failure: list[Exception] = []

        def body() -> Iterator[bytes]:
            nonlocal sent
            held = b""
            try:
                for chunk in chunks:
                    if not chunk:
                        continue
                    if sent + len(chunk) > size:
                        raise ChecksumMismatch(f"{key!r}: the source said {size} bytes and sent more")
                    if held:
                        yield held
                    held = chunk
                    sent += len(chunk)
                if sent != size:
                    raise ChecksumMismatch(f"{key!r}: the source said {size} bytes, {sent} were read")
            except Exception as exc:  # (not GeneratorExit: urllib3 dropping the body after a refusal)
                failure.append(exc)
                raise
            if held:
                yield held

        try:
            etag = self.client.put(
                self.spec.bucket, key, body(), size=size, content_type=content_type, metadata=metadata, md5=md5
            )
        except Exception:
            if failure:  # the source's failure, not the target's (urllib3 reports it as its own)
                raise failure[0] from None
            raise
        # A single PUT's etag is the MD5 of the bytes the service received (services check the
        # Content-MD5 sent, or not: moto does not).
        if verify and md5 is not None and etag.lower() != md5.lower():
            remove_failed_copy(self, key)
            if not _MD5.match(etag):  # another kind of etag: the bytes were not hashed, so hash from now on
                self.etags_are_md5 = False
                raise ChecksumMismatch(
                    f"{key!r}: the target's etag {etag} is not an MD5, so the copy was not verified; "
                    "it is removed and copied again with its bytes hashed"
                )
            raise ChecksumMismatch(f"{key!r}: the target's etag {etag} is not the source's MD5 {md5}")
        return sent

    def discard(self, key: str) -> None:
        self.client.delete(self.spec.bucket, key)

    def close(self) -> None:
        self.client.close()


def remove_failed_copy(target: Target, key: str) -> None:
    """:meth:`Target.discard`, best effort: a target that cannot remove it now leaves the retry to
    find it (its failsafe trusts only an object of the listed size and MD5)."""
    try:
        target.discard(key)
    except Exception as exc:
        log.warning("could not remove %r after its copy failed its check: %s", key, exc)


def part_size(size: int, wanted: int = PART_SIZE) -> int:
    """The part size of a multipart upload of ``size`` bytes: ``wanted``, or the whole MiB that
    keeps it within MAX_PARTS parts."""
    return max(wanted, -(-size // (MAX_PARTS * MIB)) * MIB)


def open_source(cv: Conveyor, spec: Endpoint) -> Source:
    return S3Source(spec) if spec.vendor == "s3" else BucketSource(spec, cv.bucket(spec.bucket))


def open_target(
    cv: Conveyor, spec: Endpoint, *, multipart_threshold: int = MULTIPART_THRESHOLD, part_size: int = PART_SIZE
) -> Target:
    """The job's target; an S3 one writes objects over ``multipart_threshold`` bytes in parts of
    ``part_size`` (:func:`check_multipart` says which values S3 allows)."""
    if spec.vendor == "s3":
        return S3Target(spec, multipart_threshold=multipart_threshold, part_size=part_size)
    return BucketTarget(cv.bucket(spec.bucket))


def check_multipart(multipart_threshold: int, part_size: int) -> None:
    """Refuse a threshold or a part size S3 does not allow: a single PUT holds at most 5 GiB, and a
    part (but the last) at least 5 MiB and at most 5 GiB."""
    if not 0 <= multipart_threshold <= MAX_PUT_BYTES:
        raise InvalidRequest(
            f"multipart_threshold is {multipart_threshold}; it must be 0 to {MAX_PUT_BYTES} (5 GiB, S3's largest PUT)"
        )
    if not MIN_PART_SIZE <= part_size <= MAX_PUT_BYTES:
        raise InvalidRequest(
            f"part_size is {part_size}; it must be {MIN_PART_SIZE} (5 MiB) to {MAX_PUT_BYTES} (5 GiB), as S3's parts"
        )


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


def precheck_both(cv: Conveyor, source: Endpoint, target: Endpoint) -> None:
    """:func:`precheck_source` and :func:`precheck_target` at once (each is a round trip to its
    service: over a distant link a job starts one round trip sooner); the source's failure is
    raised if both fail, as when they ran one after the other."""
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="slurper-precheck") as pool:
        checking = pool.submit(precheck_target, cv, target)
        try:
            precheck_source(cv, source)
        finally:
            concurrent.futures.wait([checking])
        checking.result()
