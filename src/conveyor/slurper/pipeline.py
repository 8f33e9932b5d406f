"""The pipeline: the consumers of three real Conveyor queues of the job's account.

``slurper-list``
    ``{"job", "seq", "after"}``: list page ``seq`` of the source, starting after ``after``; record
    its keys (:meth:`JobStore.record_listing`), then send a transfer message per new key and the
    next page's message at once — listing never waits for transfers.
``slurper-transfer``
    ``{"job", "key"}``: lock the key (owned by this message's id), copy the object streaming,
    verify its size (and MD5 where the source's etag is one), then unlock and count it in one
    transaction. A batch of these (``TRANSFER_BATCH``) locks its keys in one transaction, copies
    them side by side on the worker's ``TRANSFER_CONCURRENCY`` threads and counts them in one
    transaction: the job store commits twice per batch, not per object. A failure retries with
    backoff; the last failure sends the message to ``slurper-transfer-dlq`` and counts the key as
    failed with an ``importErrorRetryExhaustion`` log entry. A worker's death is no failure of the
    object: its message comes back when its lease runs out, takes its own lock again, and finds the
    object already in the target.
``slurper-lifecycle``
    ``{"job", "tick"}`` every ``tick_seconds`` while a job runs, and ``{"job", "check": true}`` when a
    transfer may have finished it: complete the job once its listing is finished and every listed
    key is accounted for.

A message that is a duplicate (another copy already did its work) is acked and does nothing. A
listing or tick message delivered *again* (its earlier delivery died after its commit, before its
sends) sends its successors again; duplicates of those are harmless.

>>> app = conveyor.App(cv)
>>> conveyor.slurper.add_consumers(app)
>>> app.run()
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from conveyor import limits
from conveyor.errors import ConveyorError, InvalidRequest, QueueExists, QueueNotFound
from conveyor.slurper.endpoints import (
    MULTIPART_THRESHOLD,
    PART_SIZE,
    Existing,
    Source,
    Target,
    check_multipart,
    open_source,
    open_target,
    remove_failed_copy,
)
from conveyor.slurper.errors import ChecksumMismatch
from conveyor.slurper.model import JobRow
from conveyor.slurper.rules import MAX_OBJECT_BYTES, MD5, ByteRate, changed, skip_reason
from conveyor.slurper.store import Finished, KeyOutcome, LockedKey, job_store
from conveyor.storage.errors import BucketNotFound, BucketUnreachable, ObjectNotFound

if TYPE_CHECKING:
    from conveyor.client.sync import Conveyor
    from conveyor.consumer.app import App
    from conveyor.consumer.batch import Message, MessageBatch

log = logging.getLogger("conveyor.slurper")

LIST_QUEUE = "slurper-list"
TRANSFER_QUEUE = "slurper-transfer"
LIFECYCLE_QUEUE = "slurper-lifecycle"
DEAD_LETTER_QUEUE = "slurper-transfer-dlq"
QUEUES = (LIST_QUEUE, TRANSFER_QUEUE, LIFECYCLE_QUEUE, DEAD_LETTER_QUEUE)
PAGE_SIZE = 1000
TRANSFER_BATCH = 10
# Objects copied at once by one worker process, all its transfer batches together.
TRANSFER_CONCURRENCY = TRANSFER_BATCH * 4
MAX_RETRIES = 3
# The throttle: over the last THROTTLE_SECONDS, at least THROTTLE_MINIMUM transfers of which
# THROTTLE_RATIO failed postpone the next listing by THROTTLE_DELAY seconds.
THROTTLE_SECONDS = 30.0
THROTTLE_MINIMUM = 20
THROTTLE_RATIO = 0.5
THROTTLE_DELAY = 5
# A fault hook for the crash tests: "after-copy:N" kills this process with SIGKILL right after its
# Nth copy, before the key is counted (the lock is held, the object is in the target).
FAULT_VARIABLE = "CONVEYOR_SLURPER_FAULT"


class FailureWindow:
    """Transfer outcomes of the last ``seconds`` in this process: ``spiking()`` while at least
    ``minimum`` of them happened and ``ratio`` or more of those failed (a source or target down).
    The list consumer then stops enqueuing transfers: it puts each listing back for ``delay``
    seconds, and lists again once the failures pass."""

    def __init__(
        self, seconds: float, minimum: int, ratio: float, clock: Any = time.monotonic, *, delay: int = THROTTLE_DELAY
    ) -> None:
        self.seconds, self.minimum, self.ratio, self.delay = seconds, minimum, ratio, delay
        self._clock = clock
        self._outcomes: collections.deque[tuple[float, bool]] = collections.deque()
        self._failed = 0
        self._lock = threading.Lock()

    def record(self, failed: bool) -> None:
        with self._lock:
            self._outcomes.append((self._clock(), failed))
            self._failed += failed
            self._expire()

    def _expire(self) -> None:
        horizon = self._clock() - self.seconds
        while self._outcomes and self._outcomes[0][0] < horizon:
            self._failed -= self._outcomes.popleft()[1]

    def spiking(self) -> bool:
        with self._lock:
            self._expire()
            total = len(self._outcomes)
            return total >= self.minimum and self._failed >= self.ratio * total


@dataclasses.dataclass(frozen=True)
class Settled:
    """A transfer message's outcome: its key's count, and whether the message goes to the dead
    letter queue first (its retries are exhausted)."""

    message: Message
    finished: Finished
    dead_letter: bool = False


class SourceObjectGone(ConveyorError):
    """The source has no object at a listed key (deleted since, or a ``keys`` entry that never was)."""

    code = 16006
    status = 404


def ensure_queues(cv: Conveyor) -> None:
    """Make the pipeline's queues in ``cv``'s account if they are missing."""
    for name in QUEUES:
        try:
            cv.queue(name)
        except QueueNotFound:
            with contextlib.suppress(QueueExists):  # another process made it first
                cv.create_queue(name)


def _chunks(bodies: Sequence[Mapping[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    size = 0
    for body in bodies:
        weight = len(str(body)) + 64
        if batch and (len(batch) == limits.MAX_BATCH_MESSAGES or size + weight > limits.MAX_BATCH_BYTES // 2):
            yield batch
            batch, size = [], 0
        batch.append({"body": dict(body)})
        size += weight
    if batch:
        yield batch


def send(cv: Conveyor, queue: str, bodies: Sequence[Mapping[str, Any]], *, copies: int = 1, delay: int = 0) -> None:
    """Send ``bodies`` to the pipeline's ``queue`` (each ``copies`` times: the duplicate-delivery
    test's way to deliver every message twice)."""
    q = cv.queue(queue)
    for batch in _chunks([b for body in bodies for b in [body] * copies]):
        q.send_batch(batch, delay_seconds=delay or None)


def start_messages(cv: Conveyor, row: JobRow, *, copies: int = 1) -> None:
    """What sets a new or resumed job going: its next listing (unless finished), a transfer for
    every pending key (a resumed job's), and its next lifecycle tick."""
    if not row.listing_done:
        send(cv, LIST_QUEUE, [{"job": row.id, "seq": row.next_listing, "after": row.listing_after}], copies=copies)
    store = job_store(cv)
    for keys in store.pending_keys(row.id):
        send(cv, TRANSFER_QUEUE, [{"job": row.id, "key": k} for k in keys], copies=copies)
    send(cv, LIFECYCLE_QUEUE, [{"job": row.id, "tick": row.lifecycle_tick}])


class Pipeline:
    """The three consumers over one client's account. ``copies`` > 1 sends every list and transfer
    message that many times (the exactly-once accounting test)."""

    def __init__(
        self,
        cv: Conveyor,
        *,
        page_size: int = PAGE_SIZE,
        max_retries: int = MAX_RETRIES,
        retry_delay: int = 1,
        tick_seconds: int = 2,
        max_object_bytes: int = MAX_OBJECT_BYTES,
        throttle: FailureWindow | None = None,
        max_bytes_per_second: int | None = None,
        copies: int = 1,
        multipart_threshold: int = MULTIPART_THRESHOLD,
        part_size: int = PART_SIZE,
    ) -> None:
        check_multipart(multipart_threshold, part_size)
        self.cv = cv
        self.store = job_store(cv)
        self.page_size = page_size
        self.max_retries = max_retries
        self.retry_delay = retry_delay
        self.tick_seconds = tick_seconds
        self.max_object_bytes = max_object_bytes
        self.copies = copies
        self.multipart_threshold = multipart_threshold
        self.part_size = part_size
        self.throttle = throttle or FailureWindow(THROTTLE_SECONDS, THROTTLE_MINIMUM, THROTTLE_RATIO)
        self.throttled = 0  # listings postponed by the throttle
        self.rate = ByteRate(max_bytes_per_second) if max_bytes_per_second else None
        self._sources: dict[str, Source] = {}
        self._targets: dict[str, Target] = {}
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(TRANSFER_CONCURRENCY, thread_name_prefix="slurper-transfer")
        fault = os.environ.get(FAULT_VARIABLE, "")
        self._kill_after = int(fault.split(":", 1)[1]) if fault.startswith("after-copy:") else None
        self._copies = 0

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for source in self._sources.values():
            source.close()
        for target in self._targets.values():
            target.close()

    def _source(self, row: JobRow) -> Source:
        with self._lock:
            if row.id not in self._sources:
                self._sources[row.id] = open_source(self.cv, row.source)
            return self._sources[row.id]

    def _target(self, row: JobRow) -> Target:
        with self._lock:
            if row.id not in self._targets:
                self._targets[row.id] = open_target(
                    self.cv, row.target, multipart_threshold=self.multipart_threshold, part_size=self.part_size
                )
            return self._targets[row.id]

    def _now_ms(self) -> int:
        return self.cv.engine.clock.now_ms()

    # -- listing ------------------------------------------------------------------------------
    def handle_list(self, batch: MessageBatch) -> None:
        for m in batch.messages:
            self.list_page(m)

    def list_page(self, m: Message) -> None:
        body = m.body
        row = self.store.find(body["job"])
        if row is None or row.status != "running":
            return  # paused: resume sends the next listing again; aborted or completed: nothing to do
        seq = int(body["seq"])
        if seq < row.next_listing:
            if seq == row.next_listing - 1 and m.attempts > 1:
                self._after_listing(row.id, seq, row.listing_after, row.listing_done)
            return
        if seq > row.next_listing:
            log.warning("job %s: listing %d arrived before listing %d; dropped", row.id, seq, row.next_listing)
            return
        if self.throttle.spiking():  # transfers are failing: list this page later
            self.throttled += 1
            log.info("job %s: transfers are failing; listing %d postponed %d s", row.id, seq, self.throttle.delay)
            send(self.cv, LIST_QUEUE, [body], delay=self.throttle.delay)
            return
        try:
            page, done = self._source(row).list_page(body["after"], self.page_size)
        except BucketNotFound as exc:
            self.store.log(row.id, self._now_ms(), "migrationErrorFailedContinuation", exc.message)
            raise
        after = page[-1].key if page else body["after"]
        if self.store.record_listing(row.id, seq, page, after=after, done=done):
            self._after_listing(row.id, seq, after, done)

    def _after_listing(self, job_id: str, seq: int, after: str, done: bool) -> None:
        keys = self.store.pending_of_listing(job_id, seq)
        send(self.cv, TRANSFER_QUEUE, [{"job": job_id, "key": k} for k in keys], copies=self.copies)
        if done:
            send(self.cv, LIFECYCLE_QUEUE, [{"job": job_id, "check": True}])
        else:
            send(self.cv, LIST_QUEUE, [{"job": job_id, "seq": seq + 1, "after": after}], copies=self.copies)

    # -- transfers ----------------------------------------------------------------------------
    def handle_transfer(self, batch: MessageBatch) -> None:
        """The batch's keys locked in one transaction per job, copied in parallel on the transfer
        pool, then counted in one transaction per job: two commits per batch, not two per object.
        A message is acked only once its key is counted (or found to need nothing)."""
        by_job: dict[str, list[Message]] = {}
        for m in batch.messages:
            by_job.setdefault(m.body["job"], []).append(m)
        copies: list[tuple[str, concurrent.futures.Future[Settled | None]]] = []
        for job_id, messages in by_job.items():
            row, locked = self.store.lock_keys(job_id, [(m.body["key"], m.id) for m in messages])
            if row is None or row.status != "running":
                for m in messages:  # aborted, completed or gone: nothing to do; paused: resume resends
                    m.ack()
                continue
            for m, lock in zip(messages, locked, strict=True):
                if lock.result != "locked":
                    m.ack()  # finished, or another copy of this message holds the key
                else:
                    copies.append((job_id, self._pool.submit(self._attempt, row, m, lock)))
        settled: dict[str, list[Settled]] = {}
        for job_id, future in copies:
            done = future.result()
            if done is not None:
                settled.setdefault(job_id, []).append(done)
        for job_id, finished in settled.items():
            self._count(job_id, finished)

    def _count(self, job_id: str, settled: list[Settled]) -> None:
        # Into the dead letter queue first, then counted: a crash between repeats the send, never
        # loses it. The queue itself never dead-letters a transfer (its max_retries is the highest),
        # so a key is never dead-lettered without being counted.
        dead = [s.message.body for s in settled if s.dead_letter]
        if dead:
            send(self.cv, DEAD_LETTER_QUEUE, dead)
        if self.store.finish_keys(job_id, [s.finished for s in settled], now_ms=self._now_ms()):
            # This batch counted the last keys: let the lifecycle consumer complete the job now.
            send(self.cv, LIFECYCLE_QUEUE, [{"job": job_id, "check": True}])
        for s in settled:
            s.message.ack()

    def _attempt(self, row: JobRow, m: Message, locked: LockedKey) -> Settled | None:
        """Copy ``m``'s key (locked by ``m``): its outcome to count, or None when ``m`` is retried
        (its key stays locked by it)."""
        key = m.body["key"]
        try:
            outcome, size, note = self._copy(row, key, locked)
        except SourceObjectGone as exc:  # deleted since it was listed (or never there): no retry helps
            return Settled(m, Finished(key, m.id, "failed", 0, ("importErrorRetryExhaustion", exc.message)))
        except Exception as exc:  # every other failure may pass: retry with backoff, then dead-letter
            self.throttle.record(True)
            if m.attempts <= self.max_retries:
                log.info("job %s: %r failed (attempt %d), retrying: %s", row.id, key, m.attempts, exc)
                m.retry(delay_seconds=min(self.retry_delay * 2 ** (m.attempts - 1), 300))
                return None
            reason = exc.message if isinstance(exc, ConveyorError) else f"{type(exc).__name__}: {exc}"
            note = ("importErrorRetryExhaustion", f"failed after {m.attempts} attempts: {reason}")
            return Settled(m, Finished(key, m.id, "failed", 0, note), dead_letter=True)
        self._fault_point()
        self.throttle.record(False)
        return Settled(m, Finished(key, m.id, outcome, size, note))

    def _fault_point(self) -> None:
        if self._kill_after is None:
            return
        with self._lock:
            self._copies += 1
            if self._copies >= self._kill_after:
                os.kill(os.getpid(), signal.SIGKILL)

    def _copy(self, row: JobRow, key: str, locked: LockedKey) -> tuple[KeyOutcome, int, tuple[str, str] | None]:
        skip = skip_reason(key, locked.size, locked.storage_class, self.max_object_bytes)
        if skip is not None:
            return "skipped", 0, skip
        target = self._target(row)
        # An overwriting job's first delivery of a key need not look: only an earlier delivery of
        # this message (``again``) can have copied it without counting it.
        existing = self._existing(row, target, key) if locked.again or not row.overwrite else None
        if existing is not None:
            # The failsafe: a copy whose count was lost (not one that failed its check: another size
            # or MD5 than the listing's is copied again).
            if existing.written_at * 1000 > row.created_ms and not changed(existing, locked.size, locked.etag):
                return "transferred", max(locked.size, 0), None
            if not row.overwrite and not changed(existing, locked.size, locked.etag):
                return "skipped", 0, None
        with contextlib.ExitStack() as opened:
            try:
                meta, chunks = opened.enter_context(self._source(row).open(key))
            except ObjectNotFound as exc:  # the source's answer; a target's 404 is retried as any failure
                raise SourceObjectGone(exc.message) from None
            skip = skip_reason(key, meta.size, "", self.max_object_bytes)
            if skip is not None:
                return "skipped", 0, skip
            # The bytes are checked where the source's etag is their MD5 (not a multipart etag): by
            # the target where it can (an S3 PUT's Content-MD5), else hashed here on the way.
            md5 = meta.etag if MD5.match(meta.etag) else None
            hashed = md5 is not None and not target.checks_md5(meta.size)
            digest = hashlib.md5(usedforsecurity=False) if hashed else None
            counted = 0

            def counting() -> Iterator[bytes]:
                nonlocal counted
                for chunk in chunks:
                    if self.rate is not None:
                        self.rate.take(len(chunk))
                    if digest is not None:
                        digest.update(chunk)
                    counted += len(chunk)
                    yield chunk

            written = target.write(
                key,
                counting(),
                size=meta.size,
                content_type=meta.content_type,
                metadata=meta.metadata,
                md5=md5,
                verify=md5 is not None and not hashed,
            )
        if not counted == written == meta.size:
            remove_failed_copy(target, key)  # so that a retry copies it again rather than take it as copied
            raise ChecksumMismatch(
                f"{key!r}: the source said {meta.size} bytes, {counted} were read, {written} written"
            )
        if digest is not None and digest.hexdigest() != meta.etag:
            remove_failed_copy(target, key)
            raise ChecksumMismatch(f"{key!r}: the bytes read do not match the source's MD5 etag {meta.etag}")
        return "transferred", written, None

    @staticmethod
    def _existing(row: JobRow, target: Target, key: str) -> Existing | None:
        """What the target holds at ``key``. An overwriting job looks only to spare a copy whose
        count was lost, so a target that cannot describe the key (s3rver answers 500 for an object
        whose metadata a crash left half-written, until the object is written again) is copied over;
        a skip-existing job must know, and retries."""
        try:
            return target.existing(key)
        except BucketUnreachable as exc:
            if not row.overwrite:
                raise
            log.info("job %s: the target cannot describe %r (%s); copying over it", row.id, key, exc.message)
            return None

    # -- lifecycle ----------------------------------------------------------------------------
    def handle_lifecycle(self, batch: MessageBatch) -> None:
        for m in batch.messages:
            self.lifecycle(m)

    def lifecycle(self, m: Message) -> None:
        body = m.body
        row = self.store.find(body["job"])
        if row is None or row.status != "running":
            return  # a paused job's ticks start again when it resumes
        if self.store.try_complete(row.id, self._now_ms()) or body.get("check"):
            return
        tick = int(body["tick"])
        if self.store.advance_tick(row.id, tick) or (tick == row.lifecycle_tick - 1 and m.attempts > 1):
            send(self.cv, LIFECYCLE_QUEUE, [{"job": row.id, "tick": tick + 1}], delay=self.tick_seconds)


def add_consumers(
    app: App,
    *,
    page_size: int = PAGE_SIZE,
    max_retries: int = MAX_RETRIES,
    retry_delay: int = 1,
    tick_seconds: int = 2,
    max_object_bytes: int = MAX_OBJECT_BYTES,
    visibility_timeout_ms: int = limits.DEFAULT_VISIBILITY_TIMEOUT_MS,
    throttle: FailureWindow | None = None,
    max_bytes_per_second: int | None = None,
    copies: int = 1,
    multipart_threshold: int = MULTIPART_THRESHOLD,
    part_size: int = PART_SIZE,
) -> Pipeline:
    """Run the pipeline's three consumers in ``app`` (its client's account): make the queues if
    missing and declare their consumers. ``max_object_bytes``: larger objects are skipped
    (``importSkippedOversized``); ``retry_delay``: the first retry's delay in seconds, doubled on
    each retry; ``visibility_timeout_ms``: how soon a dead worker's messages come back (the lease
    is renewed while a handler runs); ``throttle``: when failing transfers postpone listing (by
    default half of at least 20 in 30 s); ``max_bytes_per_second``: what this worker reads from
    sources at most, all its transfers together.

    >>> app = conveyor.App(cv)
    >>> conveyor.slurper.add_consumers(app)
    >>> app.run()
    """
    if not 1 <= page_size <= PAGE_SIZE:
        raise InvalidRequest(f"page_size is {page_size}; it must be 1 to {PAGE_SIZE}")
    ensure_queues(app.conveyor)
    pipeline = Pipeline(
        app.conveyor,
        page_size=page_size,
        max_retries=max_retries,
        retry_delay=retry_delay,
        tick_seconds=tick_seconds,
        max_object_bytes=max_object_bytes,
        throttle=throttle,
        max_bytes_per_second=max_bytes_per_second,
        copies=copies,
        multipart_threshold=multipart_threshold,
        part_size=part_size,
    )
    common: dict[str, Any] = {
        "max_batch_timeout": 0,
        "max_retries": limits.MAX_RETRIES,
        "visibility_timeout_ms": visibility_timeout_ms,
    }
    app.consumer(LIST_QUEUE, max_batch_size=1, retry_delay=1, **common)(pipeline.handle_list)
    # Batches in hand: twice what the copying threads can take, so a batch is ready whenever one
    # ends, and the rest of the backlog stays in the queue for other workers (a worker that leased
    # 250 batches held 2,500 keys it could not start, and their locks queued for the store).
    batches = 2 * TRANSFER_CONCURRENCY // TRANSFER_BATCH
    app.consumer(TRANSFER_QUEUE, max_batch_size=TRANSFER_BATCH, max_concurrency=batches, **common)(
        pipeline.handle_transfer
    )
    app.consumer(LIFECYCLE_QUEUE, max_batch_size=10, **common)(pipeline.handle_lifecycle)
    return pipeline
