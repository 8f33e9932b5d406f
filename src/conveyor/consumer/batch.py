"""What a push handler receives: :class:`MessageBatch` of :class:`Message`, with Cloudflare's
ack/retry contract.

- Each message is decided once: the first of ``ack()`` / ``retry()`` wins, later calls are ignored
  with a warning. A batch call (``ack_all`` / ``retry_all``) decides every message not decided yet,
  so a per-message call beats a later batch call, and the second batch call changes nothing.
- After the handler: undecided messages are acked if it returned, retried if it raised.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from conveyor.client.validation import check_delay
from conveyor.codec import decode
from conveyor.model import Metrics

log = logging.getLogger("conveyor.consumer")

ACK = "ack"
RETRY = "retry"


_UNDECODED = object()


class Message:
    """One delivered message: ``id``, ``timestamp``, ``body``, ``attempts``, ``content_type``, and
    ``traceparent`` (the W3C trace context of the step or span that sent it, or None).

    The body is decoded from its stored bytes when the handler first reads it, in the handler's
    thread: a handler that routes on ``id`` or ``attempts`` never pays for it, and the dispatcher's
    thread, which every batch passes through, never does.
    """

    __slots__ = (
        "_body",
        "_decision",
        "_delay",
        "_stored",
        "attempts",
        "content_type",
        "id",
        "lease_id",
        "timestamp_ms",
        "traceparent",
    )

    def __init__(
        self,
        id: str,
        timestamp_ms: int,
        stored: bytes,
        attempts: int,
        content_type: str,
        lease_id: str,
        traceparent: str | None = None,
    ) -> None:
        self.id = id
        self.timestamp_ms = timestamp_ms
        self._stored = stored
        self._body: Any = _UNDECODED
        self.attempts = attempts
        self.content_type = content_type
        self.lease_id = lease_id
        self.traceparent = traceparent
        self._decision: str | None = None
        self._delay: int | None = None

    @property
    def body(self) -> Any:
        """The message's body: a JSON value, a str (``text``) or bytes (``bytes``)."""
        if self._body is _UNDECODED:
            self._body = decode(self._stored, self.content_type)
        return self._body

    def __repr__(self) -> str:
        return f"<Message {self.id} attempts={self.attempts}>"

    @property
    def timestamp(self) -> datetime:
        """When the message was sent."""
        return datetime.fromtimestamp(self.timestamp_ms / 1000, UTC)

    def ack(self) -> None:
        """Mark the message delivered: it will not come back, even if the handler then raises."""
        self._decide(ACK, None, "ack()")

    def retry(self, delay_seconds: int | None = None) -> None:
        """Deliver the message again, after ``delay_seconds`` (default: the consumer's retry_delay).

        A delay outside 0 ..= 86,400 raises ``InvalidMessage`` (10203) and decides nothing.
        """
        if delay_seconds is not None:
            check_delay(delay_seconds)
        self._decide(RETRY, delay_seconds, "retry()")

    def _decide(self, decision: str, delay: int | None, call: str) -> bool:
        if self._decision is not None:
            log.warning("message %s: %s ignored, it was already marked %s", self.id, call, self._decision)
            return False
        self._decision, self._delay = decision, delay
        return True


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    metrics: Metrics


class MessageBatch:
    """A batch of messages from one queue, handed to a push consumer's handler.

    ``metrics`` may be a function: the queue's metrics are then read when the handler first asks for
    ``metadata`` (fresh as of that moment), and not at all by a handler that never does, so that no
    batch waits on a metrics read to start. ``settle_now`` is the dispatcher's: see
    :func:`settle_early`."""

    def __init__(
        self,
        queue: str,
        messages: list[Message],
        metrics: Metrics | Callable[[], Metrics],
        settle_now: Callable[[BaseException | None], None] | None = None,
    ) -> None:
        self.queue = queue
        self.messages = messages
        self._metrics = metrics
        self._metadata: BatchMetadata | None = None
        self._batch_call: str | None = None
        self._settle_now = settle_now

    @property
    def metadata(self) -> BatchMetadata:
        """The queue's metrics (``metadata.metrics``): backlog count and bytes, oldest message."""
        if self._metadata is None:
            metrics = self._metrics
            self._metadata = BatchMetadata(metrics if isinstance(metrics, Metrics) else metrics())
        return self._metadata

    def __repr__(self) -> str:
        return f"<MessageBatch {self.queue} x{len(self.messages)}>"

    def ack_all(self) -> None:
        """Ack every message not already marked."""
        self._all(ACK, None, "ack_all()")

    def retry_all(self, delay_seconds: int | None = None) -> None:
        """Retry every message not already marked (a bad ``delay_seconds`` raises, as for ``retry``)."""
        if delay_seconds is not None:
            check_delay(delay_seconds)
        self._all(RETRY, delay_seconds, "retry_all()")

    def _all(self, decision: str, delay: int | None, call: str) -> None:
        if self._batch_call is not None:
            log.warning("batch of %s: %s ignored, %s came first", self.queue, call, self._batch_call)
            return
        self._batch_call = call
        skipped = 0
        for m in self.messages:
            if m._decision is None:
                m._decision, m._delay = decision, delay
            else:
                skipped += 1
        if skipped:
            # The per-message call came first and wins; the batch call is ignored for those.
            log.warning("batch of %s: %s ignored for %d messages already marked", self.queue, call, skipped)

    def outcome(self, failed: bool, default_delay: int) -> tuple[list[str], list[tuple[str, int]], int]:
        """Lease ids to ack, (lease id, delay) to retry, and how many retries were explicit."""
        acks: list[str] = []
        retries: list[tuple[str, int]] = []
        explicit = 0
        for m in self.messages:
            decision = m._decision or (RETRY if failed else ACK)
            if decision == ACK:
                acks.append(m.lease_id)
            else:
                explicit += m._decision == RETRY
                retries.append((m.lease_id, default_delay if m._delay is None else m._delay))
        return acks, retries, explicit


def settle_early(batch: MessageBatch, error: BaseException | None) -> None:
    """Settle ``batch`` now, as if its handler had returned (``error`` None) or raised ``error``,
    though the handler's thread is still busy: for a handler that gives up on a call it cannot stop
    (a workflow run whose step ran past its timeout hands the run on and abandons its thread). The
    batch's place in the consumer's concurrency is free at once, and nothing the thread does to
    the batch afterwards changes anything."""
    if batch._settle_now is None:
        raise RuntimeError(f"{batch!r} was not delivered by a dispatcher; it cannot be settled early")
    batch._settle_now(error)
