"""One exception hierarchy for every refusal Conveyor makes.

Each error carries Cloudflare's error ``code`` (where Cloudflare has one) and the HTTP ``status`` the
REST API answers with, so the same object drives the Python API, the CLI and the HTTP server.
"""

from __future__ import annotations

from typing import ClassVar


class ConveyorError(Exception):
    """Base of every Conveyor error: ``code`` is Cloudflare's number, ``status`` the HTTP status."""

    code: ClassVar[int] = 15000
    status: ClassVar[int] = 500

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        # Seconds after which asking again may succeed (HTTP's ``retry-after``); None: no advice.
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"{self.message} (code {self.code})"


class InvalidRequest(ConveyorError):
    """A request whose shape or values are wrong."""

    code = 10207
    status = 400


class MalformedJSON(InvalidRequest):
    code = 10208


class InvalidMessage(InvalidRequest):
    """A bad content type, body type or delay on one message."""

    code = 10203


class InvalidBatchDelay(InvalidRequest):
    code = 10202


class MessageTooLarge(InvalidRequest):
    code = 10204
    status = 413


class BatchTooLarge(InvalidRequest):
    code = 10205
    status = 413


class TooManyMessages(InvalidRequest):
    code = 10206


class InvalidQueueName(InvalidRequest):
    code = 11003


class InvalidQueueId(InvalidRequest):
    code = 10107


class InvalidSetting(InvalidRequest):
    """A queue or consumer setting outside its documented range."""

    code = 10207


class QueueNotFound(ConveyorError):
    code = 10104
    status = 404


class ConsumerNotFound(ConveyorError):
    code = 11001
    status = 404


class QueueExists(ConveyorError):
    code = 11009
    status = 409


class ConsumerExists(ConveyorError):
    code = 11004
    status = 409


class DeliveryPaused(ConveyorError):
    """Pull on a queue whose delivery is paused (Cloudflare's ``queue_delivery_paused``)."""

    code = 409
    status = 409


class Unauthorized(ConveyorError):
    code = 10106
    status = 401


class Forbidden(ConveyorError):
    code = 10000
    status = 403


class Overloaded(ConveyorError):
    """A queue sent to faster than its rate allows (``--max-send-rate``); ``retry_after`` says when
    the batch would be taken."""

    code = 10250
    status = 429


class StorageError(ConveyorError):
    """The storage refused: full disk, unwritable directory, corrupt or foreign file, a queue's limit."""

    code = 10251
    status = 507


class StorageLimitExceeded(StorageError):
    """A queue at its backlog or storage limit (``--max-backlog``, ``--max-queue-bytes``): Cloudflare's
    10251, answered 429 as an overload is (the reference gives 10251 no status), with ``retry_after``."""

    code = 10251
    status = 429


class StorageFull(StorageError):
    code = 10251


class CorruptStorage(StorageError):
    code = 15000
    status = 500
