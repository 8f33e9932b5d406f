"""The synchronous client: :class:`Conveyor` (the queues of one deployment) and :class:`Queue`."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from conveyor import limits, tracing
from conveyor.client import validation as check
from conveyor.codec import decode
from conveyor.deployment import Deployment
from conveyor.engine.accounts import INTERNAL_MARK
from conveyor.engine.base import Clock, Engine
from conveyor.errors import ConsumerNotFound, DeliveryPaused, InvalidQueueId, InvalidRequest
from conveyor.model import (
    AckResult,
    ConsumerInfo,
    ConsumerSettings,
    ConsumerType,
    Counters,
    DeliveryPolicy,
    Metrics,
    PulledMessage,
    QueueInfo,
    QueueSettings,
    SendBatchResult,
    SendResult,
    StoredMessage,
)

if TYPE_CHECKING:  # workflows and storage sit above the client: imported when used, never at module level
    from conveyor.slurper.client import Slurper
    from conveyor.slurper.remote import RemoteSlurper
    from conveyor.storage import Bucket, BucketInfo
    from conveyor.storage.kv import KVNamespaceInfo, KVStore
    from conveyor.storage.kv_handle import KVNamespace
    from conveyor.workflows.client import Workflow
    from conveyor.workflows.counter import Counter


class Closes(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=Closes)


def to_pulled(m: StoredMessage) -> PulledMessage:
    return PulledMessage(
        m.id, decode(m.body, m.content_type), m.attempts, m.lease_id, m.timestamp_ms, m.content_type, m.traceparent
    )


class Conveyor:
    """The queues of one account of a deployment (embedded: account ``local`` unless told otherwise).

    >>> cv = conveyor.connect("sqlite:///tmp/conveyor")
    >>> q = cv.create_queue("emails")
    >>> q.send({"to": "a@b"})
    SendResult(id='6f1c...', metrics=Metrics(backlog_count=1, ...))
    """

    def __init__(self, engine: Engine, url: str = "") -> None:
        self.engine = engine
        self.url = url
        self._components: dict[str, Any] = {}
        self._components_lock = threading.Lock()

    def __enter__(self) -> Conveyor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._components_lock:
            opened, self._components = list(self._components.values()), {}
        for component in reversed(opened):
            component.close()
        self.engine.close()

    @property
    def deployment(self) -> Deployment:
        """Where this client's deployment keeps its state, and the account it works in."""
        return self.engine.deployment()

    def component(self, key: str, open: Callable[[Deployment, Clock], C]) -> C:
        """The store of a part beside the queues (workflows, buckets, KV, a tool), opened once per
        client by ``open(self.deployment, self.engine.clock)`` and closed with the client.

        >>> store = cv.component("kv", open_kv_store)    # the same object on every call
        """
        with self._components_lock:
            if key not in self._components:
                self._components[key] = open(self.deployment, self.engine.clock)
            return cast(C, self._components[key])

    def create_queue(
        self,
        name: str,
        *,
        delivery_delay: int = 0,
        message_retention_period: int = limits.DEFAULT_RETENTION_SECONDS,
        delivery_paused: bool = False,
        shards: int = 1,
    ) -> Queue:
        """Create a queue; raises ``QueueExists`` if the name is taken."""
        check.check_queue_name(name)
        settings = check.check_queue_settings(QueueSettings(delivery_delay, delivery_paused, message_retention_period))
        check.check_range("shards", shards, 1, limits.MAX_SHARDS)
        return Queue(self, self.engine.create_queue(name, settings, shards))

    def queue(self, name: str) -> Queue:
        """The queue called ``name``; raises ``conveyor.QueueNotFound`` if missing."""
        return Queue(self, self.engine.get_queue(check.check_queue_name(name)))

    def queue_by_id(self, queue_id: str) -> Queue:
        """The queue with id ``queue_id`` (32 lowercase hex characters): ``InvalidQueueId`` (10107)
        if it is malformed, ``QueueNotFound`` if there is no such queue."""
        if not isinstance(queue_id, str) or not limits.ID_PATTERN.match(queue_id):
            raise InvalidQueueId(f"queue id {queue_id!r} is malformed: expected 32 lowercase hex characters")
        return Queue(self, self.engine.get_queue_by_id(queue_id))

    def list_queues(self) -> list[QueueInfo]:
        """The queues, by name; the internal queues of Conveyor's parts (``workflow~NAME``) left out."""
        return [q for q in self.engine.list_queues() if INTERNAL_MARK not in q.queue_name]

    def workflow(self, name: str) -> Workflow:
        """The workflow ``name`` (a :class:`conveyor.workflows.Workflow`); raises
        ``conveyor.WorkflowNotFound`` until a worker that runs it has started.

        >>> inst = cv.workflow("download-package").create(params={"name": "jquery"})
        """
        from conveyor.workflows.client import Workflow

        return Workflow.open(self, name)

    @property
    def slurper(self) -> Slurper | RemoteSlurper:
        """The migration jobs of this account (a :class:`conveyor.slurper.Slurper`, or over
        ``http://`` its twin speaking the server's routes; see docs/slurper.md).

        >>> job = cv.slurper.create_job(source={...}, target={"vendor": "r2", "bucket": "photos"})
        """
        if self.deployment.kind == "http":
            from conveyor.slurper.remote import RemoteSlurper

            return self.component("slurper-http", lambda deployment, clock: RemoteSlurper(deployment))
        from conveyor.slurper.client import Slurper

        return Slurper(self)

    def list_workflows(self) -> list[Workflow]:
        """The account's workflows (registered by a worker or made by :meth:`put_workflow`), by name.

        >>> {wf.name: wf.instance_counts()["running"] for wf in cv.list_workflows()}
        """
        from conveyor.workflows.records import list_workflows

        return list_workflows(self)

    def put_workflow(
        self,
        name: str,
        *,
        class_name: str | None = None,
        script_name: str | None = None,
        schedules: Sequence[str] | None = None,
        max_steps: int | None = None,
        concurrency: int | None = None,
        success_retention: float | str | None = None,
        error_retention: float | str | None = None,
    ) -> Workflow:
        """Create the workflow's record, or replace the settings an earlier put gave (Cloudflare's
        ``PUT /workflows/{name}``, wrangler's deploy): each setting given overrides the code's
        (retentions in seconds or ``"3 days"``); a worker applies them when it starts. Instances of
        a workflow that no worker runs stay ``queued``.

        >>> wf = cv.put_workflow("download-package", concurrency=4, schedules=["0 * * * *"])
        """
        from conveyor.workflows.records import put_workflow

        return put_workflow(
            self,
            name,
            class_name=class_name,
            script_name=script_name,
            schedules=schedules,
            max_steps=max_steps,
            concurrency=concurrency,
            success_retention=success_retention,
            error_retention=error_retention,
        )

    def counter(self, name: str) -> Counter:
        """The counter ``name`` of this account (a :class:`conveyor.Counter`, 0 until added to),
        for fan-in: ``add(n)``, ``notify_at_zero(workflow, instance_id, event_type)``.

        >>> cv.counter("build-42").add(-1, key="child-7")
        """
        from conveyor.workflows.counter import Counter

        return Counter(self, name)

    def delete_queue(self, name: str, *, force: bool = False) -> list[str]:
        """Delete the queue ``name``; ``force`` deletes one with damaged storage too, and returns
        where its damaged files were kept aside (see :meth:`Queue.delete`)."""
        return self.engine.delete_queue(self.queue(name).id, force=force)

    # -- buckets (conveyor.storage; imported when first used) ---------------------------------
    def create_bucket(
        self,
        name: str,
        *,
        url: str | None = None,
        endpoint: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
    ) -> Bucket:
        """Create a bucket: a directory of a SQLite deployment, or (``url="s3://bucket/prefix"``)
        an existing bucket of any S3-compatible service; ``BucketExists`` if the name is taken.
        See docs/storage.md."""
        from conveyor.storage import facade

        return facade.create_bucket(
            self,
            name,
            url=url,
            endpoint=endpoint,
            region=region,
            access_key_id=access_key_id,
            secret_access_key=secret_access_key,
        )

    def bucket(self, name: str) -> Bucket:
        """The bucket ``name``; ``conveyor.BucketNotFound`` if there is none."""
        from conveyor.storage import facade

        return facade.bucket(self, name)

    def list_buckets(self) -> list[BucketInfo]:
        from conveyor.storage import facade

        return facade.list_buckets(self)

    def delete_bucket(self, name: str) -> None:
        """Delete an empty bucket (``BucketNotEmpty`` otherwise) with its rules."""
        from conveyor.storage import facade

        facade.delete_bucket(self, name)

    # -- KV namespaces (conveyor.storage.kv_handle) -----------------------------------------------
    def _kv(self) -> tuple[KVStore, str]:
        from conveyor.engine.accounts import LOCAL_ACCOUNT
        from conveyor.storage.kv_handle import kv_store

        return kv_store(self), self.deployment.account or LOCAL_ACCOUNT

    def kv(self, title: str, *, create: bool = False) -> KVNamespace:
        """The KV namespace titled ``title``: ``KVNamespaceNotFound`` (10013) if there is none,
        unless ``create=True``, which creates it then.

        >>> kv = cv.kv("cdn-meta", create=True)
        >>> kv.put("jquery", {"latest": "3.7.1"}); kv.get("jquery")
        {'latest': '3.7.1'}
        """
        from conveyor.storage.kv_errors import KVNamespaceNotFound
        from conveyor.storage.kv_handle import KVNamespace

        store, account = self._kv()
        try:
            return KVNamespace(store, account, store.find_namespace(account, title))
        except KVNamespaceNotFound:
            if not create:
                raise
        return self.create_kv_namespace(title)

    def kv_by_id(self, namespace_id: str) -> KVNamespace:
        """The KV namespace with id ``namespace_id``; ``KVNamespaceNotFound`` if none."""
        from conveyor.storage.kv_handle import KVNamespace

        store, account = self._kv()
        return KVNamespace(store, account, store.get_namespace(account, namespace_id))

    def create_kv_namespace(self, title: str) -> KVNamespace:
        """A new KV namespace; ``KVNamespaceExists`` (10014) if the title is taken."""
        from conveyor.storage.kv_handle import KVNamespace

        store, account = self._kv()
        return KVNamespace(store, account, store.create_namespace(account, title))

    def list_kv_namespaces(self) -> list[KVNamespaceInfo]:
        """The account's KV namespaces, by title."""
        store, account = self._kv()
        return store.list_namespaces(account)

    def delete_kv_namespace(self, title: str) -> None:
        """Delete the KV namespace titled ``title`` with every key in it."""
        store, account = self._kv()
        store.delete_namespace(account, store.find_namespace(account, title).id)


# How long pull and ack trust the queue's settings and consumer as last read: a pull loop needs them
# on every call and they rarely change. A change made through this handle applies at once; one made
# elsewhere (another handle, process or server) within this time.
INFO_SECONDS = 0.1


class Queue:
    """A handle on one queue: producing, pulling, and managing it."""

    def __init__(self, client: Conveyor, info: QueueInfo) -> None:
        self._client = client
        self._engine = client.engine
        self._set_info(info)

    def _set_info(self, info: QueueInfo) -> QueueInfo:
        self._info = info
        self._info_read = time.monotonic()
        return info

    def __repr__(self) -> str:
        return f"<Queue {self.name} {self.id}>"

    @property
    def name(self) -> str:
        return self._info.queue_name

    @property
    def id(self) -> str:
        return self._info.queue_id

    def info(self, max_age: float = 0.0) -> QueueInfo:
        """The queue's current settings and consumers: read fresh, unless this handle's copy was
        read less than ``max_age`` seconds ago."""
        if max_age > 0 and time.monotonic() - self._info_read < max_age:
            return self._info
        return self._set_info(self._engine.get_queue_by_id(self.id))

    # -- producing ----------------------------------------------------------------------------
    def send(self, body: Any, content_type: str = "json", delay_seconds: int | None = None) -> SendResult:
        """Store one message durably (it is on disk when this returns); returns its ``id`` (the one
        its consumer sees) and the queue's ``metrics`` after it.

        >>> r = q.send({"n": 1}); r.id, r.metrics.backlog_count
        ('6f1c...', 1)
        >>> q.send("hi", content_type="text", delay_seconds=30)
        """
        delay = None if delay_seconds is None else check.check_delay(delay_seconds)
        info = self._info
        with tracing.Sending(info.queue_name) as traceparent:
            message = check.prepare_message(body, content_type, delay, traceparent)
            ids, metrics = self._engine.enqueue(info.queue_id, [message])
        tracing.record_sent(info.queue_name, ids)
        return SendResult(ids[0], metrics)

    def send_batch(self, messages: Sequence[Mapping[str, Any]], delay_seconds: int | None = None) -> SendBatchResult:
        """Store up to 100 messages atomically: all of them or none. Each message is a mapping of
        ``body`` and, optionally, ``content_type`` and ``delay_seconds`` (any other key is refused);
        returns their ``ids``, in order, and the queue's ``metrics``.

        >>> r = q.send_batch([{"body": {"n": 1}}, {"body": b"\\x00", "content_type": "bytes", "delay_seconds": 5}])
        >>> r.ids
        ['6f1c...', '0b9e...']
        """
        with tracing.Sending(self.name) as traceparent:
            result = self._engine.enqueue(self.id, check.prepare_batch(messages, delay_seconds, traceparent))
        tracing.record_sent(self.name, result.ids)
        return result

    # -- management ---------------------------------------------------------------------------
    def metrics(self) -> Metrics:
        return self._engine.metrics(self.id)

    def counters(self) -> Counters:
        return self._engine.counters(self.id)

    def update(
        self,
        *,
        delivery_delay: int | None = None,
        message_retention_period: int | None = None,
        delivery_paused: bool | None = None,
    ) -> QueueInfo:
        """Change some settings; the others keep their values."""
        current = self.info().settings
        changes: dict[str, Any] = {
            k: v
            for k, v in {
                "delivery_delay": delivery_delay,
                "message_retention_period": message_retention_period,
                "delivery_paused": delivery_paused,
            }.items()
            if v is not None
        }
        settings = check.check_queue_settings(dataclasses.replace(current, **changes))
        return self._set_info(self._engine.update_queue(self.id, settings))

    def pause_delivery(self) -> QueueInfo:
        return self.update(delivery_paused=True)

    def resume_delivery(self) -> QueueInfo:
        return self.update(delivery_paused=False)

    def purge(self) -> int:
        """Delete every message (delayed and in flight too); returns how many."""
        return self._engine.purge(self.id)

    def peek(self, batch_size: int = 10) -> list[PulledMessage]:
        """Read up to ``batch_size`` messages without leasing them."""
        check.check_range("batch_size", batch_size, 1, limits.MAX_BATCH_SIZE, InvalidRequest)
        return [to_pulled(m) for m in self._engine.peek(self.id, batch_size)]

    def redrive(self, to: str) -> int:
        """Move every message of this (dead letter) queue to queue ``to``; returns the count."""
        target = self._client.queue(to)
        if target.id == self.id:
            # The engines move rows oldest-first until none are left: into itself, that never ends.
            raise InvalidRequest(f"cannot redrive queue {self.name!r} into itself")
        return self._engine.redrive(self.id, target.id)

    def delete(self, *, force: bool = False) -> list[str]:
        """Delete the queue with its consumer and messages.

        A queue whose storage is damaged (``info().storage_error``) is refused with
        :class:`CorruptStorage` unless ``force=True``; then it is deleted and the damaged files are
        moved aside (``damaged/`` in the deployment directory) for inspection. Returns their paths,
        relative to the deployment: ``q.delete(force=True)`` -> ``['damaged/20261201T193000Z-<id>.0.db']``.
        """
        return self._engine.delete_queue(self.id, force=force)

    # -- consumers ----------------------------------------------------------------------------
    def consumer(self) -> ConsumerInfo | None:
        consumers = self.info().consumers
        return consumers[0] if consumers else None

    def add_consumer(
        self,
        type: ConsumerType,
        *,
        script_name: str = "",
        settings: ConsumerSettings | None = None,
        dead_letter_queue: str | None = None,
    ) -> ConsumerInfo:
        """Register the queue's one consumer; raises ``ConsumerExists`` (11004) if it has one. A
        ``worker`` consumer's ``script_name`` is its handler as ``module:function`` (or, as wrangler
        registers one, a Worker's name); anything else is ``InvalidRequest`` (10207).

        >>> q.add_consumer("worker", script_name="myapp.consumers:handle")
        """
        if type == "worker":
            check.check_script_name(script_name)
        settings = check.check_consumer_settings(settings or ConsumerSettings())
        dlq = "" if dead_letter_queue is None else check.check_queue_name(dead_letter_queue)
        if dlq == self.name:
            raise InvalidRequest(f"queue {self.name!r} cannot be its own dead letter queue")
        self._info_read = float("-inf")  # pull and ack read the consumer again
        return self._engine.add_consumer(self.id, type, script_name, settings, dlq)

    def add_pull_consumer(
        self,
        batch_size: int = limits.DEFAULT_PULL_BATCH_SIZE,
        max_retries: int = limits.DEFAULT_MAX_RETRIES,
        dead_letter_queue: str | None = None,
        visibility_timeout_ms: int = limits.DEFAULT_VISIBILITY_TIMEOUT_MS,
        retry_delay: int = 0,
    ) -> ConsumerInfo:
        """Register an ``http_pull`` consumer, so clients can :meth:`pull` and :meth:`ack`."""
        settings = ConsumerSettings(
            batch_size=batch_size,
            max_retries=max_retries,
            retry_delay=retry_delay,
            visibility_timeout_ms=visibility_timeout_ms,
        )
        return self.add_consumer("http_pull", settings=settings, dead_letter_queue=dead_letter_queue)

    def remove_consumer(self, *, type: ConsumerType | None = None, script_name: str | None = None) -> ConsumerInfo:
        """Remove the queue's consumer and return it; ``ConsumerNotFound`` if it has none.

        ``type`` and ``script_name``, when given, must match the consumer, so that removing "the
        http_pull consumer" or "worker ``emails:handle``" never removes a different one.

        >>> q.remove_consumer(type="worker", script_name="emails:handle")
        """
        consumer = self.consumer()
        if consumer is None:
            raise ConsumerNotFound(f"queue {self.name!r} has no consumer")
        if (type is not None and consumer.type != type) or (
            script_name is not None and consumer.script_name != script_name
        ):
            wanted = " ".join(x for x in (type, script_name) if x)
            actual = " ".join(x for x in (consumer.type, consumer.script_name) if x)
            raise ConsumerNotFound(f"queue {self.name!r} has no consumer {wanted!r}; its consumer is {actual!r}")
        self._info_read = float("-inf")
        self._engine.remove_consumer(consumer.consumer_id)
        return consumer

    def _pull_consumer(self) -> ConsumerInfo:
        """The queue's http_pull consumer, from the queue as read at most ``INFO_SECONDS`` ago (read
        again when that copy shows none, so a consumer just added is found)."""
        consumer = _pull_consumer_of(self.info(max_age=INFO_SECONDS)) or _pull_consumer_of(self.info())
        if consumer is None:
            raise InvalidRequest(
                f"queue {self.name!r} has no http_pull consumer; add one first (add_pull_consumer(), or "
                "POST .../consumers with type http_pull)"
            )
        return consumer

    # -- pulling ------------------------------------------------------------------------------
    def pull(self, batch_size: int | None = None, visibility_timeout_ms: int | None = None) -> list[PulledMessage]:
        """Lease up to ``batch_size`` messages for ``visibility_timeout_ms``; ``[]`` when none.

        >>> for m in q.pull(batch_size=5): ...; q.ack(acks=[m.lease_id])
        """
        return [to_pulled(m) for m in self.lease(batch_size, visibility_timeout_ms)]

    def lease(self, batch_size: int | None = None, visibility_timeout_ms: int | None = None) -> list[StoredMessage]:
        """:meth:`pull` without decoding the bodies: the stored bytes, for a server to relay."""
        consumer = self._pull_consumer()
        if self._info.settings.delivery_paused:  # read with the consumer
            raise DeliveryPaused(f"queue_delivery_paused: delivery of queue {self.name!r} is paused")
        size = consumer.settings.batch_size if batch_size is None else batch_size
        check.check_range("batch_size", size, 1, limits.MAX_BATCH_SIZE, InvalidRequest)
        vt = consumer.settings.visibility_timeout_ms if visibility_timeout_ms is None else visibility_timeout_ms
        check.check_range("visibility_timeout_ms", vt, 1, limits.MAX_VISIBILITY_TIMEOUT_MS, InvalidRequest)
        policy = DeliveryPolicy(consumer.settings.max_retries, consumer.dead_letter_queue or None)
        return self._engine.lease(self.id, size, vt, policy)

    def ack(self, acks: Sequence[str] = (), retries: Sequence[tuple[str, int | None] | str] = ()) -> AckResult:
        """Settle pulled messages: acks are deleted, retries come back after their delay.

        ``retries`` holds lease ids or ``(lease_id, delay_seconds)`` pairs; a missing delay takes
        the consumer's ``retry_delay``.
        """
        consumer = self._pull_consumer()
        default = consumer.settings.retry_delay
        pairs: list[tuple[str, int]] = []
        for item in retries:
            lid, delay = (item, None) if isinstance(item, str) else item
            pairs.append((lid, default if delay is None else check.check_delay(delay)))
        policy = DeliveryPolicy(consumer.settings.max_retries, consumer.dead_letter_queue or None)
        result = self._engine.settle(self.id, list(acks), pairs, policy)
        return AckResult(result.acked, result.retried + result.dead_lettered + result.dropped, result.warnings)


def _pull_consumer_of(info: QueueInfo) -> ConsumerInfo | None:
    consumer = info.consumers[0] if info.consumers else None
    return consumer if consumer is not None and consumer.type == "http_pull" else None
