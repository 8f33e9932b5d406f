"""An engine whose sends pass a :class:`~conveyor.client.backpressure.SendGate` first, and which is
otherwise the engine it wraps: back-pressure above the engine interface, the same for every driver.

``conveyor.connect(url, queue_limits=...)`` views it as one account, and ``conveyor serve`` views its
one limited engine as each request's account, so an account's ownership of a queue is checked
before the queue's bucket is touched.

>>> engine = LimitedEngine(open_engine("sqlite:///var/lib/conveyor"), QueueLimits(max_send_rate=5000))
"""

from __future__ import annotations

from collections.abc import Sequence

from conveyor.client.backpressure import QueueLimits, SendGate
from conveyor.deployment import Deployment
from conveyor.engine.base import Clock, Engine
from conveyor.model import (
    ConsumerInfo,
    ConsumerSettings,
    ConsumerType,
    Counters,
    DeliveryPolicy,
    Metrics,
    NewMessage,
    QueueInfo,
    QueueSettings,
    SendBatchResult,
    SettleResult,
    StoredMessage,
    WorkerEntry,
)


class LimitedEngine(Engine):
    """``inner``, with every enqueue admitted by ``limits`` (see the module docstring)."""

    def __init__(self, inner: Engine, limits: QueueLimits) -> None:
        self.inner = inner
        self.gate = SendGate(limits, inner.metrics, lambda queue_id: inner.get_queue_by_id(queue_id).queue_name)

    @property
    def clock(self) -> Clock:
        return self.inner.clock

    @clock.setter
    def clock(self, value: Clock) -> None:
        self.inner.clock = value

    def enqueue(
        self, queue_id: str, messages: Sequence[NewMessage], *, urgent: bool = False, owed: bool = False
    ) -> SendBatchResult:
        self.gate.admit(queue_id, messages)
        try:
            result = self.inner.enqueue(queue_id, messages, urgent=urgent, owed=owed)
        except BaseException:
            self.gate.refund(queue_id, len(messages))  # nothing was stored: the batch took nothing
            raise
        self.gate.observed(queue_id, result.metrics)
        return result

    def delete_queue(self, queue_id: str, *, force: bool = False) -> list[str]:
        kept_aside = self.inner.delete_queue(queue_id, force=force)
        self.gate.forget(queue_id)
        return kept_aside

    # -- the rest is the inner engine's ------------------------------------------------------
    def create_queue(self, name: str, settings: QueueSettings, shards: int = 1) -> QueueInfo:
        return self.inner.create_queue(name, settings, shards)

    def get_queue(self, name: str) -> QueueInfo:
        return self.inner.get_queue(name)

    def get_queue_by_id(self, queue_id: str) -> QueueInfo:
        return self.inner.get_queue_by_id(queue_id)

    def queue_settings(self, queue_id: str) -> QueueSettings:
        return self.inner.queue_settings(queue_id)

    def list_queues(self, prefix: str = "") -> list[QueueInfo]:
        return self.inner.list_queues(prefix)

    def queue_names(self, prefix: str = "") -> list[str]:
        return self.inner.queue_names(prefix)

    def queues_named(self, names: Sequence[str]) -> list[QueueInfo]:
        return self.inner.queues_named(names)

    def dead_letter_sources(self, queue_name: str) -> list[str]:
        return self.inner.dead_letter_sources(queue_name)

    def update_queue(self, queue_id: str, settings: QueueSettings) -> QueueInfo:
        return self.inner.update_queue(queue_id, settings)

    def add_consumer(
        self, queue_id: str, type: ConsumerType, script_name: str, settings: ConsumerSettings, dead_letter_queue: str
    ) -> ConsumerInfo:
        return self.inner.add_consumer(queue_id, type, script_name, settings, dead_letter_queue)

    def update_consumer(self, consumer_id: str, settings: ConsumerSettings, dead_letter_queue: str) -> ConsumerInfo:
        return self.inner.update_consumer(consumer_id, settings, dead_letter_queue)

    def remove_consumer(self, consumer_id: str) -> None:
        self.inner.remove_consumer(consumer_id)

    def add_shard(self, queue_id: str) -> int:
        return self.inner.add_shard(queue_id)

    def lease(
        self, queue_id: str, max_messages: int, visibility_ms: int, policy: DeliveryPolicy
    ) -> list[StoredMessage]:
        return self.inner.lease(queue_id, max_messages, visibility_ms, policy)

    def extend(self, queue_id: str, lease_ids: Sequence[str], visibility_ms: int) -> None:
        self.inner.extend(queue_id, lease_ids, visibility_ms)

    def settle(
        self,
        queue_id: str,
        acks: Sequence[str],
        retries: Sequence[tuple[str, int]],
        policy: DeliveryPolicy,
        *,
        durable: bool = True,
    ) -> SettleResult:
        return self.inner.settle(queue_id, acks, retries, policy, durable=durable)

    def settle_and_lease(
        self,
        queue_id: str,
        acks: Sequence[str],
        retries: Sequence[tuple[str, int]],
        policy: DeliveryPolicy,
        lease: int,
        visibility_ms: int,
        *,
        durable: bool = True,
    ) -> tuple[SettleResult, list[StoredMessage]]:
        return self.inner.settle_and_lease(queue_id, acks, retries, policy, lease, visibility_ms, durable=durable)

    def release(self, queue_id: str, lease_ids: Sequence[str]) -> None:
        self.inner.release(queue_id, lease_ids)

    def purge(self, queue_id: str) -> int:
        return self.inner.purge(queue_id)

    def peek(self, queue_id: str, max_messages: int) -> list[StoredMessage]:
        return self.inner.peek(queue_id, max_messages)

    def metrics(self, queue_id: str) -> Metrics:
        return self.inner.metrics(queue_id)

    def counters(self, queue_id: str) -> Counters:
        return self.inner.counters(queue_id)

    def expire(self) -> dict[str, int]:
        return self.inner.expire()

    def redrive(self, from_queue_id: str, to_queue_id: str) -> int:
        return self.inner.redrive(from_queue_id, to_queue_id)

    def next_visible_ms(self, queue_id: str) -> int | None:
        return self.inner.next_visible_ms(queue_id)

    def wait(self, queue_id: str, timeout: float) -> None:
        self.inner.wait(queue_id, timeout)

    def wake(self, queue_id: str) -> None:
        self.inner.wake(queue_id)

    def deployment_engine(self) -> Engine | None:
        return self.inner.deployment_engine()  # maintenance sends nothing: it runs on the inner engine

    def deployment(self) -> Deployment:
        return self.inner.deployment()

    def acquire_leadership(self) -> bool:
        return self.inner.acquire_leadership()

    def release_leadership(self) -> None:
        self.inner.release_leadership()

    def record_worker(self, entry: WorkerEntry, registered_by: str = "") -> None:
        self.inner.record_worker(entry, registered_by)

    def remove_worker(self, worker_id: str, registered_by: str = "") -> None:
        self.inner.remove_worker(worker_id, registered_by)

    def list_workers(self) -> list[WorkerEntry]:
        return self.inner.list_workers()

    def close(self) -> None:
        self.inner.close()
