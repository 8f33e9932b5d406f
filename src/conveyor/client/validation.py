"""Checks of every input against Cloudflare's limits, each refusal naming the limit and the value.

Shared by the Python API, the CLI and the HTTP server, so all three refuse the same things with the
same codes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from conveyor import limits
from conveyor.codec import encode, encode_json
from conveyor.errors import (
    BatchTooLarge,
    InvalidBatchDelay,
    InvalidMessage,
    InvalidQueueName,
    InvalidRequest,
    InvalidSetting,
    MessageTooLarge,
    TooManyMessages,
)
from conveyor.model import ConsumerSettings, NewMessage, QueueSettings

# What a message of a batch may say (over REST too): anything else, say ``delaySeconds``, would
# otherwise be ignored, and the message sent at once.
MESSAGE_FIELDS = frozenset({"body", "content_type", "delay_seconds"})
MAX_SCRIPT_NAME_CHARS = 255
# A Cloudflare Worker's name, which is what wrangler's `queues consumer add QUEUE SCRIPT` sends.
WORKER_NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}\Z")
# Parts of a function's __qualname__ that are not identifiers (a handler defined in a function).
_QUALNAME_MARKERS = frozenset({"<locals>", "<lambda>"})


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def unknown_fields(given: Iterable[str], allowed: Iterable[str]) -> str:
    """``"unknown field 'x'"`` or ``"unknown fields 'x', 'y'"``: the keys of ``given`` that
    ``allowed`` lacks, in order; ``""`` if there are none."""
    known = set(allowed)
    unknown = [repr(key) for key in given if key not in known]
    if not unknown:
        return ""
    return f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}"


def check_message_fields(message: Mapping[str, Any], where: str = "") -> None:
    unknown = unknown_fields(message, MESSAGE_FIELDS)
    if unknown:
        raise InvalidMessage(f"message{where} has {unknown}; a message takes body, content_type and delay_seconds")


def _is_handler(name: str) -> bool:
    module, sep, qualname = name.partition(":")
    modules, names = module.split("."), qualname.split(".")
    return (
        bool(sep)
        and all(part.isidentifier() for part in modules)
        and all(part.isidentifier() or part in _QUALNAME_MARKERS for part in names)
    )


def check_script_name(name: object) -> str:
    """A worker consumer's script: the handler as ``module:function`` (a dotted module of Python
    identifiers, then a function or ``Class.method``, as ``conveyor worker`` and ``App`` register
    it), or the name of a Cloudflare Worker, which is what wrangler sends. Nothing runs a name
    just because it was registered: a worker runs only the handlers its own command line names.

    >>> check_script_name("myapp.consumers:handle"); check_script_name("my-worker")
    """
    if (
        isinstance(name, str)
        and len(name) <= MAX_SCRIPT_NAME_CHARS
        and (_is_handler(name) or WORKER_NAME_PATTERN.match(name))
    ):
        return name
    raise InvalidRequest(
        f"invalid script_name {name!r}: name the handler as module:function (a dotted module of Python "
        "identifiers, for example myapp.consumers:handle) or, as wrangler does, a Worker (lowercase letters, "
        f"digits, '-' and '_'); at most {MAX_SCRIPT_NAME_CHARS} characters"
    )


def check_queue_name(name: object) -> str:
    if not isinstance(name, str) or not limits.QUEUE_NAME_PATTERN.match(name):
        raise InvalidQueueName(
            f"invalid queue name {name!r}: use 1 to 63 lowercase letters, digits and hyphens, "
            "starting and ending with a letter or digit"
        )
    return name


def check_range(name: str, value: object, low: int, high: int, error: type[InvalidRequest] = InvalidSetting) -> int:
    if not _is_int(value) or not low <= value <= high:  # type: ignore[operator]
        raise error(f"{name} is {value!r}; it must be a whole number from {low} to {high}")
    return value  # type: ignore[return-value]


def check_queue_settings(settings: QueueSettings) -> QueueSettings:
    check_range("delivery_delay", settings.delivery_delay, 0, limits.MAX_DELAY_SECONDS)
    check_range(
        "message_retention_period",
        settings.message_retention_period,
        limits.MIN_RETENTION_SECONDS,
        limits.MAX_RETENTION_SECONDS,
    )
    if not isinstance(settings.delivery_paused, bool):
        raise InvalidSetting(f"delivery_paused is {settings.delivery_paused!r}; it must be true or false")
    return settings


def check_consumer_settings(settings: ConsumerSettings) -> ConsumerSettings:
    check_range("batch_size", settings.batch_size, 1, limits.MAX_BATCH_SIZE)
    check_range("max_retries", settings.max_retries, 0, limits.MAX_RETRIES)
    check_range("max_wait_time_ms", settings.max_wait_time_ms, 0, int(limits.MAX_BATCH_TIMEOUT * 1000))
    check_range("retry_delay", settings.retry_delay, 0, limits.MAX_DELAY_SECONDS)
    check_range("visibility_timeout_ms", settings.visibility_timeout_ms, 1, limits.MAX_VISIBILITY_TIMEOUT_MS)
    if settings.max_concurrency is not None:
        check_range("max_concurrency", settings.max_concurrency, 1, limits.MAX_CONCURRENCY)
    return settings


def check_delay(value: object, *, batch: bool = False) -> int:
    name = "batch delay_seconds" if batch else "delay_seconds"
    error = InvalidBatchDelay if batch else InvalidMessage
    return check_range(name, value, 0, limits.MAX_DELAY_SECONDS, error)


def check_message_size(size: int) -> None:
    if size > limits.MAX_MESSAGE_BYTES:
        raise MessageTooLarge(f"message is {size} bytes; the limit is {limits.MAX_MESSAGE_BYTES}")


def prepare_message(body: Any, content_type: object, delay: int | None, traceparent: str | None = None) -> NewMessage:
    data, kind = encode(body, content_type)
    check_message_size(len(data))
    return NewMessage(data, kind, delay, traceparent)


def check_batch_count(count: int) -> None:
    """A batch send holds 1 to 100 messages."""
    if not count:
        raise InvalidRequest("a batch needs at least one message")
    if count > limits.MAX_BATCH_MESSAGES:
        raise TooManyMessages(f"batch has {count} messages; the limit is {limits.MAX_BATCH_MESSAGES}")


def prepare_batch(
    messages: Sequence[Mapping[str, Any]], batch_delay: int | None, traceparent: str | None = None
) -> list[NewMessage]:
    """Encode and check a batch send: per-message delay > batch delay > (``None``) the queue's delay;
    every message carries ``traceparent``."""
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
        raise InvalidRequest("messages must be a list of {'body': ..., 'content_type': ..., 'delay_seconds': ...}")
    check_batch_count(len(messages))
    default_delay = None if batch_delay is None else check_delay(batch_delay, batch=True)
    out: list[NewMessage] = []
    total = 0
    largest = limits.MAX_MESSAGE_BYTES
    new = tuple.__new__  # a NewMessage without NamedTuple's keyword handling: this is a hot loop
    for i, message in enumerate(messages):
        if type(message) is not dict and not isinstance(message, Mapping):
            raise InvalidMessage(f"message {i} of the batch has no body")
        if not MESSAGE_FIELDS.issuperset(message):
            check_message_fields(message, f" {i} of the batch")
        if "body" not in message:
            raise InvalidMessage(f"message {i} of the batch has no body")
        kind = message.get("content_type", "json")
        # The common case goes straight to the encoder.
        data = encode_json(message["body"]) if kind == "json" else encode(message["body"], kind)[0]
        size = len(data)
        if size > largest:
            check_message_size(size)
        total += size
        delay = message.get("delay_seconds")
        out.append(new(NewMessage, (data, kind, default_delay if delay is None else check_delay(delay), traceparent)))
    if total > limits.MAX_BATCH_BYTES:
        raise BatchTooLarge(f"batch is {total} bytes; the limit is {limits.MAX_BATCH_BYTES}")
    return out
