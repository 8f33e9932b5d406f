"""The messages of Cloudflare's v4 API: push, bulk push, pull, ack, peek and the purge of refs.

A pushed message keeps its ``body`` raw (the JSON text as it came): a ``json`` body is stored as
that text, made compact, so the server neither builds the Python value of 100 bodies per batch nor
encodes them again.
"""

from __future__ import annotations

import base64
import re
from typing import Any, ClassVar

import msgspec

from conveyor import model
from conveyor.client import validation as check
from conveyor.codec import check_content_type
from conveyor.errors import InvalidMessage, InvalidRequest
from conveyor.tracing import check_traceparent
from conveyor.wire.decoding import Shape
from conveyor.wire.queues import Metrics, metrics

_INDEX = re.compile(r"messages\[(\d+)\]\Z")


class PushedMessage(Shape):
    """A message of a push (the whole body) or of a batch (one of ``messages``). A mistake in it has
    the Python API's code for the same mistake (10203). ``delay_seconds`` is any JSON value here:
    the Python API's check refuses a fractional or out-of-range one with that code too."""

    refusal: ClassVar[type[InvalidRequest]] = InvalidMessage

    body: msgspec.Raw
    content_type: str = "json"
    delay_seconds: Any = None

    @classmethod
    def named(cls, path: str) -> str:
        found = _INDEX.match(path)
        return f"message {found[1]} of the batch" if found else "message"

    def prepared(self, default_delay: int | None, where: str = "") -> model.NewMessage:
        """The message as the engine stores it, checked as the embedded API checks ``send``."""
        kind = check_content_type(self.content_type)
        delay = self.delay_seconds
        if delay is not None:
            delay = check.check_delay(_integral(delay))
        if kind == "json":
            data = msgspec.json.format(self.body, indent=-1)
            check.check_message_size(len(data))
            return model.NewMessage(data, kind, default_delay if delay is None else delay)
        body = msgspec.json.decode(self.body)
        if kind == "bytes":
            # Over JSON, a bytes body travels as base64 (as pulled messages do).
            try:
                body = base64.b64decode(body, validate=True) if isinstance(body, str) else None
            except ValueError:  # binascii.Error, or a non-ASCII string
                body = None
            if body is None:
                raise InvalidMessage(f"message{where}: a bytes body must be a base64 string")
        return check.prepare_message(body, kind, default_delay if delay is None else delay)


def _integral(value: Any) -> Any:
    """A JSON number that is whole (``5.0``) as an int; anything else as it is, for the check that
    names the field to refuse with its own code."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class BatchRequest(Shape):
    messages: list[PushedMessage] = []
    delay_seconds: Any = None

    def batch_delay(self) -> int | None:
        return None if self.delay_seconds is None else check.check_delay(_integral(self.delay_seconds), batch=True)


class SendMetadata(Shape):
    metrics: Metrics


class SendResult(Shape):
    """Cloudflare's answer to a push, and the ids the messages were given, in order (Conveyor's
    addition)."""

    metadata: SendMetadata
    message_ids: list[str]


def sent(result: model.SendBatchResult) -> SendResult:
    return SendResult(SendMetadata(metrics(result.metrics)), result.ids)


class MessageMetadata(Shape, omit_defaults=True):
    """Cloudflare's metadata of a read message, and (Conveyor's) the W3C ``traceparent`` it was
    sent in: a key of its own, so ``CF-Content-Type`` stays one a Cloudflare client knows."""

    content_type: str = msgspec.field(name="CF-Content-Type")
    traceparent: str | None = None


class Message(Shape, kw_only=True):
    """A message read from a queue: ``body`` is UTF-8 for text, base64 of the stored bytes for json
    and bytes."""

    id: str
    body: str
    attempts: int
    timestamp_ms: int
    metadata: MessageMetadata

    def to_model(self, lease_id: str = "") -> model.StoredMessage:
        kind = check_content_type(self.metadata.content_type)
        body = self.body.encode() if kind == "text" else base64.b64decode(self.body)
        traceparent = self.metadata.traceparent
        if traceparent is not None:
            check_traceparent(traceparent, "the message's traceparent")
        return model.StoredMessage(self.id, self.timestamp_ms, body, kind, self.attempts, lease_id, traceparent)


class PulledMessage(Message, kw_only=True):
    """A leased message: acked or retried by its ``lease_id``."""

    lease_id: str


class PeekedMessage(Message, kw_only=True):
    """A message read without a lease: ``ref`` names it (Cloudflare's peek answers with one)."""

    ref: str


def message_body(m: model.StoredMessage) -> str:
    if m.content_type == "text":
        return m.body.decode()
    return base64.b64encode(m.body).decode()


def pulled(m: model.StoredMessage) -> PulledMessage:
    return PulledMessage(**_read(m), lease_id=m.lease_id)


def peeked(m: model.StoredMessage) -> PeekedMessage:
    return PeekedMessage(**_read(m), ref=m.id)


def _read(m: model.StoredMessage) -> dict[str, Any]:
    """The fields of a message read from a queue, pulled or peeked."""
    return {
        "id": m.id,
        "body": message_body(m),
        "attempts": m.attempts,
        "timestamp_ms": m.timestamp_ms,
        "metadata": MessageMetadata(m.content_type, m.traceparent),
    }


class PullRequest(Shape):
    batch_size: int | None = None
    visibility_timeout_ms: int | None = None
    visibility_timeout: int | None = None


class PullResult(Shape):
    message_backlog_count: int
    messages: list[PulledMessage]
    metadata: SendMetadata


class AckItem(Shape):
    lease_id: str


class RetryItem(Shape):
    lease_id: str
    # Checked by Queue.ack, as the Python API's (10203 for a fractional one).
    delay_seconds: Any = None

    def delay(self) -> Any:
        return _integral(self.delay_seconds)


class AckRequest(Shape):
    acks: list[AckItem] = []
    retries: list[RetryItem] = []


class AckResult(Shape):
    ack_count: int = msgspec.field(name="ackCount")
    retry_count: int = msgspec.field(name="retryCount")
    warnings: dict[str, str]


class PeekRequest(Shape):
    batch_size: int = 1


class PeekResult(Shape):
    messages: list[PeekedMessage]


class MessageRef(Shape):
    ref: str


class PurgeMessagesRequest(Shape):
    refs: list[MessageRef | str] = []

    def names(self) -> list[str]:
        return [r.ref if isinstance(r, MessageRef) else r for r in self.refs]


class PurgeMessagesResult(Shape):
    errors: list[Any]
    warnings: dict[str, str]
