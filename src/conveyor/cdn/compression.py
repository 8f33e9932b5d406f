"""The compression service: brotli (quality 11) and gzip (level 9) next to each staged file, and the
relay that turns the staging bucket's notification of it into the waiting workflow's event.

>>> app = conveyor.App(cv); conveyor.cdn.add_compressor(app); app.run()    # `conveyor cdn compressor`

The round trip of one file (ProcessingWorkflow, :mod:`conveyor.cdn.pipeline`):

1. the workflow writes ``files/{name}/{version}/{dest}`` to the staging bucket and sends
   ``{"key": ..., "instance": its id}`` to the queue ``cdn-compress``, then waits for the event
   :func:`compressed_event` of that key (``step.wait_for_event``: it hibernates, nothing polls);
2. a compressor (:func:`add_compressor`, any number of processes, on any machine of a PostgreSQL
   deployment) takes the job, reads the file and writes ``{key}.br`` then ``{key}.gz``, each
   carrying the instance's id in its custom metadata (``cdn-instance``; ``cdn-compressor``: the
   host and pid of the process; ``cdn-job``: the job's message id);
3. the staging bucket's notification rule (``PutObject`` under ``files/`` ending in ``.gz``, to the
   queue ``cdn-compressed``) reports the ``.gz``: it is written last, so both outputs exist;
4. the relay (:func:`add_notification_relay`, registered by ``add_workflows`` on the workers that
   run the pipeline) reads the instance from the object's metadata and sends it the event, whose
   payload says what was done: ``{"key", "job": the message id, "compressor": host:pid, "sizes":
   {".br": bytes, ".gz": bytes}}`` — so ``conveyor trace`` links the job the workflow sent (shown
   under its step) to the compressor that did it and the wait it woke.

Every part may run twice (a compressor SIGKILLed mid-job leaves its job to be leased again, a
notification is sent at least once): the outputs are the same bytes each time (gzip's header
holds no time or name), and a second event of a type stays buffered, never read. ``.woff2`` is
already compressed: it gets neither output and the workflow sends no job for it.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import logging
import os
import socket
from typing import Any

import conveyor
from conveyor import limits
from conveyor.cdn.store import CdnStore
from conveyor.engine.accounts import LOCAL_ACCOUNT
from conveyor.extras import require_extra
from conveyor.storage.errors import InvalidNotificationRule
from conveyor.workflows import Workflow

COMPRESSION_QUEUE = "cdn-compress"
NOTIFICATION_QUEUE = "cdn-compressed"
INSTANCE_METADATA = "cdn-instance"
COMPRESSOR_METADATA = "cdn-compressor"  # host:pid of the process that wrote it (for operators, benchmarks)
JOB_METADATA = "cdn-job"  # the id of the compression job (message of cdn-compress) that wrote it
FILES_PREFIX = "files/"
UNCOMPRESSED_EXTENSIONS = (".woff2",)  # already compressed: copied raw, as cdnjs
SUFFIXES = (".br", ".gz")  # written in this order: the .gz's notification means both exist
BROTLI_QUALITY = 11
GZIP_LEVEL = 9
JOB_SECONDS = 600.0  # brotli 11 of a 25 MiB file takes about a minute on one core
log = logging.getLogger("conveyor.cdn.compressor")


def compresses(dest: str) -> bool:
    """Whether ``dest`` gets ``.br`` and ``.gz`` outputs (every extension but ``.woff2``)."""
    return not dest.endswith(UNCOMPRESSED_EXTENSIONS)


def compressed_event(key: str) -> str:
    """The event type a workflow waits for once ``key``'s outputs exist (event types have at most
    100 characters; a key has up to 1,024)."""
    return "compressed-" + hashlib.sha256(key.encode()).hexdigest()[:40]


def compress(data: bytes) -> dict[str, bytes]:
    """``{".br": brotli quality 11, ".gz": gzip level 9}`` of ``data``, the same bytes every time
    for the same library versions (the gzip header's time is 0 and it names no file)."""
    require_extra("conveyor cdn compressor", "cdn", ("brotli",))
    import brotli

    return {
        ".br": bytes(brotli.compress(data, quality=BROTLI_QUALITY)),
        ".gz": gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0),
    }


def _ensure_queue(cv: conveyor.Conveyor, name: str) -> None:
    try:
        cv.queue(name)
    except conveyor.QueueNotFound:
        with contextlib.suppress(conveyor.QueueExists):  # another process made it first
            cv.create_queue(name)


def ensure_compression(cv: conveyor.Conveyor, staging_bucket: str) -> None:
    """Make the two queues and the staging bucket's notification rule if they are missing (``cdn
    init`` makes them; a CDN made before them gets them from its first worker)."""
    _ensure_queue(cv, COMPRESSION_QUEUE)
    _ensure_queue(cv, NOTIFICATION_QUEUE)
    bucket = cv.bucket(staging_bucket)
    if any(rule.queue == NOTIFICATION_QUEUE for rule in bucket.notifications()):
        return
    with contextlib.suppress(InvalidNotificationRule):  # another process added it first (overlaps refused)
        bucket.add_notification(
            NOTIFICATION_QUEUE,
            ["PutObject"],
            prefix=FILES_PREFIX,
            suffix=SUFFIXES[-1],
            description="conveyor cdn: a file's compressed outputs exist",
        )


def _job(body: Any) -> tuple[str, str] | None:
    if not isinstance(body, dict) or set(body) != {"key", "instance"}:
        return None
    key, instance = body["key"], body["instance"]
    if not (isinstance(key, str) and key.startswith(FILES_PREFIX) and isinstance(instance, str) and instance):
        return None
    return key, instance


class Compressor:
    """The consumer of ``cdn-compress``: one job (one file) at a time per process."""

    def __init__(self, cv: conveyor.Conveyor, staging_bucket: str) -> None:
        self.bucket = cv.bucket(staging_bucket)
        self.name = f"{socket.gethostname()}:{os.getpid()}"

    def handle(self, batch: conveyor.MessageBatch) -> None:
        for message in batch.messages:
            job = _job(message.body)
            if job is None:  # not ours to guess at: dropped, and said so
                log.error("cdn compressor: dropped a malformed job %s: %.200r", message.id, message.body)
            else:
                self.compress_file(*job, job_id=message.id)
            message.ack()

    def compress_file(self, key: str, instance: str, *, job_id: str = "") -> None:
        try:
            data = self.bucket.get(key).bytes()
        except conveyor.ObjectNotFound:  # removed (lifecycle) before its turn: its workflow times out
            log.error("cdn compressor: %s is gone; nothing compressed for %s", key, instance)
            return
        metadata = {INSTANCE_METADATA: instance, COMPRESSOR_METADATA: self.name, JOB_METADATA: job_id}
        for suffix, output in compress(data).items():
            self.bucket.put(key + suffix, output, metadata=metadata)


class NotificationRelay:
    """The consumer of ``cdn-compressed``: the staging bucket's notification of a ``.gz``, sent on
    to the ProcessingWorkflow instance named in the object's metadata."""

    def __init__(self, cv: conveyor.Conveyor, staging_bucket: str, workflow: str) -> None:
        self.bucket = cv.bucket(staging_bucket)
        self.cv = cv
        self.workflow = workflow
        self._workflow: Workflow | None = None  # looked up once it exists (the app registers it)

    def handle(self, batch: conveyor.MessageBatch) -> None:
        for message in batch.messages:
            body = message.body
            obj = body.get("object") if isinstance(body, dict) else None
            key = obj.get("key") if isinstance(obj, dict) else None
            if isinstance(key, str) and key.startswith(FILES_PREFIX) and key.endswith(SUFFIXES[-1]):
                self.relay(key)
            message.ack()

    def relay(self, key: str) -> None:
        try:
            gz = self.bucket.head(key)
        except conveyor.ObjectNotFound:
            return
        instance = gz.metadata.get(INSTANCE_METADATA)
        if not instance:
            return
        source = key.removesuffix(SUFFIXES[-1])
        sizes = {SUFFIXES[-1]: gz.size}
        with contextlib.suppress(conveyor.ObjectNotFound):  # written first; only its size is told
            sizes = {SUFFIXES[0]: self.bucket.head(source + SUFFIXES[0]).size, **sizes}
        done = {
            "key": source,
            "job": gz.metadata.get(JOB_METADATA, ""),
            "compressor": gz.metadata.get(COMPRESSOR_METADATA, ""),
            "sizes": sizes,
        }
        if self._workflow is None:
            self._workflow = self.cv.workflow(self.workflow)
        try:
            self._workflow.get(instance).send_event(compressed_event(source), done)
        except conveyor.InstanceNotFound:  # it ended and was removed: nothing waits any more
            log.info("cdn: %s was compressed for %s, which no longer exists", source, instance)


def add_compressor(
    app: conveyor.App, *, visibility_timeout_ms: int = limits.DEFAULT_VISIBILITY_TIMEOUT_MS
) -> Compressor:
    """Register the compressor on ``app``: the consumer of ``cdn-compress``, one job at a time (run
    more processes for more cores). ``visibility_timeout_ms``: how long the job of a compressor
    that died is held before another takes it (a live one renews its lease)."""
    cv = app.conveyor
    store = CdnStore.open(cv.deployment)
    try:
        staging = store.settings(_account(cv)).staging_bucket
    finally:
        store.close()
    ensure_compression(cv, staging)
    compressor = Compressor(cv, staging)
    app.consumer(
        COMPRESSION_QUEUE,
        max_batch_size=1,
        max_batch_timeout=0,
        max_concurrency=1,
        visibility_timeout_ms=visibility_timeout_ms,
        handler_timeout=JOB_SECONDS,
    )(compressor.handle)
    return compressor


def add_notification_relay(app: conveyor.App, staging_bucket: str, workflow: str) -> NotificationRelay:
    """Register the relay of the staging bucket's notifications on ``app`` (``add_workflows`` does)."""
    relay = NotificationRelay(app.conveyor, staging_bucket, workflow)
    app.consumer(NOTIFICATION_QUEUE, max_batch_size=100, max_batch_timeout=0)(relay.handle)
    return relay


def _account(cv: conveyor.Conveyor) -> str:
    return cv.deployment.account or LOCAL_ACCOUNT
