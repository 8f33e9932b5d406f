"""Cloudflare's Queues REST API v4, under ``/client/v4/accounts/{account_id}``.

Each handler reads the request, calls the account's :class:`~conveyor.client.sync.Conveyor` (the
embedded API, with its checks) on the thread pool, and answers in Cloudflare's envelope and shapes.
"""

from __future__ import annotations

import base64
import math
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from conveyor import limits, shapes
from conveyor.client import validation as check
from conveyor.client.sync import Queue
from conveyor.errors import BatchTooLarge, ConsumerNotFound, InvalidMessage, InvalidRequest
from conveyor.model import ConsumerInfo, ConsumerSettings, NewMessage, QueueSettings, SendBatchResult
from conveyor.server.access import CATALOG_WRITE, READ, TOKEN_QUEUES_READ, TOKEN_QUEUES_WRITE, WRITE, declared
from conveyor.server.envelope import (
    array,
    flag,
    integral,
    known,
    mapping,
    ok,
    parse_json,
    read_body,
    read_json,
    text,
    whole,
)
from conveyor.server.service import Context, blocking, context

DEFAULT_PER_PAGE = 100
MAX_PER_PAGE = 1000


# What Cloudflare's clients send (the `cloudflare` SDK, wrangler, Conveyor's remote engine); any
# other field is refused by name rather than ignored.
QUEUE_FIELDS = frozenset({"queue_name", "settings", "jurisdiction"})
QUEUE_SETTINGS_FIELDS = frozenset({"delivery_delay", "delivery_paused", "message_retention_period"})
# wrangler's `consumer add` also sends its --env as environment_name ("" without one): accepted, and
# meaningless here (a Conveyor deployment has no Worker environments).
CONSUMER_FIELDS = frozenset({"type", "script_name", "script", "environment_name", "dead_letter_queue", "settings"})
CONSUMER_SETTINGS_FIELDS = frozenset(
    {"batch_size", "max_retries", "max_wait_time_ms", "max_concurrency", "retry_delay", "visibility_timeout_ms"}
)
BATCH_FIELDS = frozenset({"messages", "delay_seconds"})
PULL_FIELDS = frozenset({"batch_size", "visibility_timeout_ms", "visibility_timeout"})
ACK_FIELDS = frozenset({"acks", "retries"})
ACK_ITEM_FIELDS = frozenset({"lease_id"})
RETRY_ITEM_FIELDS = frozenset({"lease_id", "delay_seconds"})
PEEK_FIELDS = frozenset({"batch_size"})
PURGE_FIELDS = frozenset({"delete_messages_permanently"})
PURGE_MESSAGES_FIELDS = frozenset({"refs"})


# -- queues -------------------------------------------------------------------------------------
def _queue_body(body: dict[str, Any]) -> dict[str, Any]:
    known(body, QUEUE_FIELDS, "the queue")
    if body.get("jurisdiction") is not None:
        # Refused, not ignored: a caller asking for data residency must not believe it got it.
        raise InvalidRequest(
            f"jurisdiction {body['jurisdiction']!r} is not supported: a Conveyor deployment keeps its data "
            "where its storage is"
        )
    return body


def _settings(body: dict[str, Any], base: QueueSettings) -> QueueSettings:
    given = known(mapping(body, "settings"), QUEUE_SETTINGS_FIELDS, "settings")
    return QueueSettings(
        delivery_delay=whole(given, "delivery_delay", base.delivery_delay),
        delivery_paused=flag(given, "delivery_paused", base.delivery_paused),
        message_retention_period=whole(given, "message_retention_period", base.message_retention_period),
    )


async def create_queue(request: Request) -> Response:
    ctx = context(request)
    body = _queue_body(await read_json(request))
    name = check.check_queue_name(text(body, "queue_name"))
    ctx.principal.check_create(name)
    s = _settings(body, QueueSettings())
    queue = await blocking(
        ctx.client.create_queue,
        name,
        delivery_delay=s.delivery_delay,
        message_retention_period=s.message_retention_period,
        delivery_paused=s.delivery_paused,
    )
    return ok(shapes.queue(await blocking(queue.info)))


def _page(request: Request) -> tuple[int, int]:
    def number(key: str, default: int, high: int) -> int:
        raw = request.query_params.get(key)
        if raw is None or raw == "":
            return default
        # ASCII digits only: str.isdigit() also takes '²' (which int() refuses) and '٣' (which it reads as 3).
        if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= high:
            raise InvalidRequest(f"{key} is {raw!r}; it must be a whole number from 1 to {high}")
        return int(raw)

    return number("page", 1, 10**9), number("per_page", DEFAULT_PER_PAGE, MAX_PER_PAGE)


def paged(items: list[Any], page: int, per_page: int) -> Response:
    chunk = items[(page - 1) * per_page : page * per_page]
    info = {
        "page": page,
        "per_page": per_page,
        "count": len(chunk),
        "total_count": len(items),
        "total_pages": math.ceil(len(items) / per_page),
    }
    return ok(chunk, result_info=info)


async def list_queues(request: Request) -> Response:
    ctx = context(request)
    page, per_page = _page(request)
    name = request.query_params.get("name")
    queues = [
        q
        for q in await blocking(ctx.client.list_queues)
        if ctx.principal.sees(q.queue_name) and (not name or q.queue_name == name)
    ]
    return paged([shapes.queue(q) for q in queues], page, per_page)


async def get_queue(request: Request) -> Response:
    _, info = await context(request).lookup(request.path_params["queue_id"])
    return ok(shapes.queue(info))


async def _change_queue(request: Request, *, replace: bool) -> Response:
    ctx = context(request)
    queue, current = await ctx.lookup(request.path_params["queue_id"])
    body = _queue_body(await read_json(request))
    new_name = text(body, "queue_name")
    if new_name is not None and new_name != queue.name:
        raise InvalidRequest(f"renaming a queue ({queue.name!r} to {new_name!r}) is not supported")
    s = _settings(body, QueueSettings() if replace else current.settings)
    info = await blocking(
        queue.update,
        delivery_delay=s.delivery_delay,
        message_retention_period=s.message_retention_period,
        delivery_paused=s.delivery_paused,
    )
    return ok(shapes.queue(info))


async def update_queue(request: Request) -> Response:
    return await _change_queue(request, replace=True)


async def edit_queue(request: Request) -> Response:
    return await _change_queue(request, replace=False)


async def delete_queue(request: Request) -> Response:
    queue = await context(request).queue(request.path_params["queue_id"])
    force = request.query_params.get("force", "false")
    if force not in ("true", "false"):
        raise InvalidRequest(f"force is {force!r}; it must be true or false")
    kept_aside = await blocking(queue.delete, force=force == "true")
    # Cloudflare answers null; a forced delete (Conveyor's own) says where the damaged files went.
    return ok({"kept_aside": kept_aside} if force == "true" else None)


async def queue_metrics(request: Request) -> Response:
    queue = await context(request).queue(request.path_params["queue_id"])
    return ok(shapes.metrics(await blocking(queue.metrics)))


async def start_purge(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    body = known(await read_json(request, required=False), PURGE_FIELDS, "a purge")
    if flag(body, "delete_messages_permanently") is not True:
        raise InvalidRequest("purging deletes every message for good: send delete_messages_permanently: true")
    ctx.service.purges[queue.id] = ctx.client.engine.clock.now_ms()
    await blocking(queue.purge)
    return ok(shapes.queue(await blocking(queue.info)))


async def purge_status(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    started = ctx.service.purges.get(queue.id)
    if started is None:
        return ok({"started_at": "", "completed": True})
    when = datetime.fromtimestamp(started / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    # Purges run to completion inside the request that starts them.
    return ok({"started_at": when, "completed": True})


# -- consumers ----------------------------------------------------------------------------------
def _consumer_settings(body: dict[str, Any], kind: str) -> ConsumerSettings:
    given = known(mapping(body, "settings"), CONSUMER_SETTINGS_FIELDS, "settings")
    default_batch = limits.DEFAULT_PULL_BATCH_SIZE if kind == "http_pull" else limits.DEFAULT_MAX_BATCH_SIZE
    base = ConsumerSettings(batch_size=default_batch)
    if "max_concurrency" in given and given["max_concurrency"] is None:
        concurrency = None
    else:
        concurrency = whole(given, "max_concurrency", base.max_concurrency)
    return check.check_consumer_settings(
        ConsumerSettings(
            batch_size=whole(given, "batch_size", base.batch_size),
            max_retries=whole(given, "max_retries", base.max_retries),
            max_wait_time_ms=whole(given, "max_wait_time_ms", base.max_wait_time_ms),
            max_concurrency=concurrency,
            retry_delay=whole(given, "retry_delay", base.retry_delay),
            visibility_timeout_ms=whole(given, "visibility_timeout_ms", base.visibility_timeout_ms),
        )
    )


def _consumer_request(body: dict[str, Any], queue: Queue) -> tuple[str, str, ConsumerSettings, str]:
    known(body, CONSUMER_FIELDS, "the consumer")
    text(body, "environment_name")  # wrangler's; checked to be a string, and not used
    kind = text(body, "type", "worker")
    if kind not in ("worker", "http_pull"):
        raise InvalidRequest(f"consumer type is {kind!r}; it must be 'worker' or 'http_pull'")
    script = text(body, "script_name") or text(body, "script") or ""
    if kind == "worker":
        if not script:
            raise InvalidRequest("a worker consumer needs a script_name")
        check.check_script_name(script)
    dlq = text(body, "dead_letter_queue") or ""
    if dlq:
        check.check_queue_name(dlq)
        if dlq == queue.name:
            raise InvalidRequest(f"queue {queue.name!r} cannot be its own dead letter queue")
    return kind, script, _consumer_settings(body, kind), dlq


async def create_consumer(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    body = await read_json(request)
    kind, script, settings, dlq = _consumer_request(body, queue)
    if dlq:
        ctx.principal.check_queue(dlq)
    info = await blocking(
        queue.add_consumer,
        kind,
        script_name=script,
        settings=settings,
        dead_letter_queue=dlq or None,
    )
    return ok(shapes.consumer(info))


async def _queue_consumer(ctx: Context, request: Request) -> tuple[Queue, ConsumerInfo]:
    queue = await ctx.queue(request.path_params["queue_id"])
    consumer_id = request.path_params["consumer_id"]
    for c in (await blocking(queue.info)).consumers:
        if c.consumer_id == consumer_id:
            return queue, c
    raise ConsumerNotFound(f"consumer {consumer_id!r} does not exist on queue {queue.name!r}")


async def list_consumers(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    page, per_page = _page(request)
    consumers = (await blocking(queue.info)).consumers
    return paged([shapes.consumer(c) for c in consumers], page, per_page)


async def get_consumer(request: Request) -> Response:
    _, consumer = await _queue_consumer(context(request), request)
    return ok(shapes.consumer(consumer))


async def update_consumer(request: Request) -> Response:
    ctx = context(request)
    queue, consumer = await _queue_consumer(ctx, request)
    body = await read_json(request)
    body.setdefault("type", consumer.type)
    if consumer.type == "worker":
        body.setdefault("script_name", consumer.script_name)
    kind, _, settings, dlq = _consumer_request(body, queue)
    if kind != consumer.type:
        raise InvalidRequest(f"a consumer's type cannot change ({consumer.type} to {kind}); delete it first")
    if dlq:
        ctx.principal.check_queue(dlq)
    info = await blocking(ctx.client.engine.update_consumer, consumer.consumer_id, settings, dlq)
    return ok(shapes.consumer(info))


async def delete_consumer(request: Request) -> Response:
    ctx = context(request)
    _, consumer = await _queue_consumer(ctx, request)
    await blocking(ctx.client.engine.remove_consumer, consumer.consumer_id)
    return ok(None)


# -- messages -----------------------------------------------------------------------------------
def rest_message(message: Any, default_delay: int, where: str = "") -> NewMessage:
    """One message of a push or bulk push, checked like the embedded API checks ``send``."""
    if not isinstance(message, dict):
        raise InvalidMessage(f"message{where} has no body")
    if not check.MESSAGE_FIELDS.issuperset(message):
        check.check_message_fields(message, where)
    if "body" not in message:
        raise InvalidMessage(f"message{where} has no body")
    content_type = message.get("content_type", "json")
    body = message["body"]
    if content_type == "bytes":
        # Over JSON, a bytes body travels as base64 (as pulled messages do).
        if not isinstance(body, str):
            raise InvalidMessage(f"message{where}: a bytes body must be a base64 string")
        try:
            body = base64.b64decode(body, validate=True)
        except ValueError:  # binascii.Error, or a non-ASCII string
            raise InvalidMessage(f"message{where}: a bytes body must be a base64 string") from None
    delay = message.get("delay_seconds")
    if delay is not None:
        # The Python API's check and code (10203) for a fractional or out-of-range delay.
        delay = check.check_delay(integral(delay))
    return check.prepare_message(body, content_type, default_delay if delay is None else delay)


def sent(result: SendBatchResult) -> dict[str, Any]:
    """Cloudflare's answer to a push, and the ids the messages were given (Conveyor's addition)."""
    return {"metadata": {"metrics": shapes.metrics(result.metrics)}, "message_ids": result.ids}


async def push(request: Request) -> Response:
    ctx = context(request)
    body = await read_json(request)

    def send() -> SendBatchResult:
        queue, info = ctx.message_lookup_sync(request.path_params["queue_id"])
        message = rest_message(body, info.settings.delivery_delay)
        return ctx.client.engine.enqueue(queue.id, [message])

    return ok(sent(await blocking(send)))


async def bulk_push(request: Request) -> Response:
    ctx = context(request)
    raw = await read_body(request)

    def send() -> SendBatchResult:
        # Parsed here, on the thread pool: a batch is up to 256 KB of bodies, and the event loop
        # meanwhile reads the other connections' requests.
        body = known(parse_json(raw), BATCH_FIELDS, "a batch")
        messages = array(body, "messages")
        if not messages:
            raise InvalidRequest("a batch needs at least one message")
        if len(messages) > limits.MAX_BATCH_MESSAGES:
            check.prepare_batch(messages, None)  # raises TooManyMessages with the standard message
        batch_delay = body.get("delay_seconds")
        if batch_delay is not None:
            batch_delay = check.check_delay(integral(batch_delay), batch=True)
        queue, info = ctx.message_lookup_sync(request.path_params["queue_id"])
        default = info.settings.delivery_delay if batch_delay is None else batch_delay
        prepared = [rest_message(m, default, f" {i} of the batch") for i, m in enumerate(messages)]
        total = sum(len(m.body) for m in prepared)
        if total > limits.MAX_BATCH_BYTES:
            raise BatchTooLarge(f"batch is {total} bytes; the limit is {limits.MAX_BATCH_BYTES}")
        return ctx.client.engine.enqueue(queue.id, prepared)

    return ok(sent(await blocking(send)))


async def pull(request: Request) -> Response:
    ctx = context(request)
    body = known(await read_json(request, required=False), PULL_FIELDS, "a pull")
    size = whole(body, "batch_size")
    vt = whole(body, "visibility_timeout_ms")
    if vt is None:
        vt = whole(body, "visibility_timeout")

    def lease() -> dict[str, Any]:
        queue, _ = ctx.message_lookup_sync(request.path_params["queue_id"])
        leased = queue.lease(size, vt)
        metrics = ctx.client.engine.metrics(queue.id)
        return {
            "message_backlog_count": metrics.backlog_count,
            "messages": [shapes.pulled(m) for m in leased],
            "metadata": {"metrics": shapes.metrics(metrics)},
        }

    return ok(await blocking(lease))


def _lease_ids(items: list[Any], key: str, fields: frozenset[str]) -> list[dict[str, Any]]:
    out = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("lease_id"), str):
            raise InvalidRequest(f"each of {key} must be an object with a string lease_id")
        out.append(dict(known(item, fields, f"each of {key}")))
    return out


async def ack(request: Request) -> Response:
    ctx = context(request)
    body = known(await read_json(request, required=False), ACK_FIELDS, "an ack")
    acks = [a["lease_id"] for a in _lease_ids(array(body, "acks"), "acks", ACK_ITEM_FIELDS)]
    retries = _lease_ids(array(body, "retries"), "retries", RETRY_ITEM_FIELDS)
    # The delay is checked by Queue.ack, as the Python API's (10203 for a fractional one).
    given = [(r["lease_id"], integral(r.get("delay_seconds"))) for r in retries]

    def settle() -> dict[str, Any]:
        queue, _ = ctx.message_lookup_sync(request.path_params["queue_id"])
        result = queue.ack(acks, given)
        return {"ackCount": result.ack_count, "retryCount": result.retry_count, "warnings": result.warnings}

    return ok(await blocking(settle))


async def peek(request: Request) -> Response:
    ctx = context(request)
    body = known(await read_json(request, required=False), PEEK_FIELDS, "a peek")
    size = whole(body, "batch_size", 1)
    check.check_range("batch_size", size, 1, limits.MAX_BATCH_SIZE, InvalidRequest)

    def read() -> list[dict[str, Any]]:
        queue, _ = ctx.message_lookup_sync(request.path_params["queue_id"])
        return [shapes.peeked(m) for m in ctx.client.engine.peek(queue.id, size)]

    return ok({"messages": await blocking(read)})


async def purge_messages(request: Request) -> Response:
    """Deleting single messages by ``ref`` is not something Conveyor's engines do: every ref gets a warning."""
    ctx = context(request)
    await ctx.queue(request.path_params["queue_id"])
    body = known(await read_json(request), PURGE_MESSAGES_FIELDS, "a purge of messages")
    refs = array(body, "refs")
    warnings = {
        str(r.get("ref") if isinstance(r, dict) else r): "deleting single messages is not supported; use purge"
        for r in refs
    }
    return ok({"errors": [], "warnings": warnings})


PREFIX = "/client/v4/accounts/{account_id}"
Q = PREFIX + "/queues/{queue_id}"

ROUTES = [
    declared(PREFIX + "/queues", create_queue, "POST", TOKEN_QUEUES_WRITE),
    declared(PREFIX + "/queues", list_queues, "GET", TOKEN_QUEUES_READ),
    declared(Q, get_queue, "GET", READ),
    declared(Q, update_queue, "PUT", CATALOG_WRITE),
    declared(Q, edit_queue, "PATCH", CATALOG_WRITE),
    declared(Q, delete_queue, "DELETE", CATALOG_WRITE),
    declared(Q + "/metrics", queue_metrics, "GET", READ),
    declared(Q + "/purge", start_purge, "POST", WRITE),
    declared(Q + "/purge", purge_status, "GET", READ),
    declared(Q + "/consumers", create_consumer, "POST", CATALOG_WRITE),
    declared(Q + "/consumers", list_consumers, "GET", READ),
    declared(Q + "/consumers/{consumer_id}", get_consumer, "GET", READ),
    declared(Q + "/consumers/{consumer_id}", update_consumer, "PUT", CATALOG_WRITE),
    declared(Q + "/consumers/{consumer_id}", delete_consumer, "DELETE", CATALOG_WRITE),
    declared(Q + "/messages", push, "POST", WRITE),
    declared(Q + "/messages/batch", bulk_push, "POST", WRITE),
    declared(Q + "/messages/pull", pull, "POST", WRITE),
    declared(Q + "/messages/ack", ack, "POST", WRITE),
    declared(Q + "/messages/peek", peek, "POST", READ),
    declared(Q + "/messages/purge", purge_messages, "POST", WRITE),
]
