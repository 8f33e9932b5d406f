"""Cloudflare's Queues REST API v4, under ``/client/v4/accounts/{account_id}``.

Each handler reads the request, calls the account's :class:`~conveyor.client.sync.Conveyor` (the
embedded API, with its checks) on the thread pool, and answers in Cloudflare's envelope and shapes.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from conveyor import limits, wire
from conveyor.client import validation as check
from conveyor.client.sync import Queue
from conveyor.errors import BatchTooLarge, ConsumerNotFound, InvalidMessage, InvalidRequest
from conveyor.model import ConsumerInfo, ConsumerSettings, QueueSettings, SendBatchResult
from conveyor.server.access import CATALOG_WRITE, READ, TOKEN_QUEUES_READ, TOKEN_QUEUES_WRITE, WRITE, declared
from conveyor.server.envelope import ok, read, read_body
from conveyor.server.service import Context, blocking, context
from conveyor.tracing import check_traceparent

DEFAULT_PER_PAGE = 100
MAX_PER_PAGE = 1000


# -- queues -------------------------------------------------------------------------------------
def _queue_body(body: wire.QueueRequest) -> wire.QueueRequest:
    if body.jurisdiction is not None:
        # Refused, not ignored: a caller asking for data residency must not believe it got it.
        raise InvalidRequest(
            f"jurisdiction {body.jurisdiction!r} is not supported: a Conveyor deployment keeps its data "
            "where its storage is"
        )
    return body


async def create_queue(request: Request) -> Response:
    ctx = context(request)
    body = _queue_body(await read(request, wire.QueueRequest))
    name = check.check_queue_name(body.queue_name)
    ctx.principal.check_create(name)
    s = body.settings.over(QueueSettings())
    queue = await blocking(
        ctx.client.create_queue,
        name,
        delivery_delay=s.delivery_delay,
        message_retention_period=s.message_retention_period,
        delivery_paused=s.delivery_paused,
    )
    return ok(wire.queue(await blocking(queue.info)))


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
    info = wire.ResultInfo(page, per_page, len(chunk), len(items), math.ceil(len(items) / per_page))
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
    return paged([wire.queue(q) for q in queues], page, per_page)


async def get_queue(request: Request) -> Response:
    _, info = await context(request).lookup(request.path_params["queue_id"])
    return ok(wire.queue(info))


async def _change_queue(request: Request, *, replace: bool) -> Response:
    ctx = context(request)
    queue, current = await ctx.lookup(request.path_params["queue_id"])
    body = _queue_body(await read(request, wire.QueueRequest))
    new_name = body.queue_name
    if new_name is not None and new_name != queue.name:
        raise InvalidRequest(f"renaming a queue ({queue.name!r} to {new_name!r}) is not supported")
    s = body.settings.over(QueueSettings() if replace else current.settings)
    info = await blocking(
        queue.update,
        delivery_delay=s.delivery_delay,
        message_retention_period=s.message_retention_period,
        delivery_paused=s.delivery_paused,
    )
    return ok(wire.queue(info))


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
    return ok(wire.KeptAside(kept_aside) if force == "true" else None)


async def queue_metrics(request: Request) -> Response:
    queue = await context(request).queue(request.path_params["queue_id"])
    return ok(wire.metrics(await blocking(queue.metrics)))


async def start_purge(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    body = await read(request, wire.PurgeRequest, required=False)
    if body.delete_messages_permanently is not True:
        raise InvalidRequest("purging deletes every message for good: send delete_messages_permanently: true")
    ctx.service.purges[queue.id] = ctx.client.engine.clock.now_ms()
    await blocking(queue.purge)
    return ok(wire.queue(await blocking(queue.info)))


async def purge_status(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    started = ctx.service.purges.get(queue.id)
    if started is None:
        return ok(wire.PurgeStatus(started_at="", completed=True))
    when = datetime.fromtimestamp(started / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    # Purges run to completion inside the request that starts them.
    return ok(wire.PurgeStatus(started_at=when, completed=True))


# -- consumers ----------------------------------------------------------------------------------
def _consumer_settings(body: wire.ConsumerRequest, kind: str) -> ConsumerSettings:
    default_batch = limits.DEFAULT_PULL_BATCH_SIZE if kind == "http_pull" else limits.DEFAULT_MAX_BATCH_SIZE
    return check.check_consumer_settings(body.settings.over(ConsumerSettings(batch_size=default_batch)))


def _consumer_request(body: wire.ConsumerRequest, queue: Queue) -> tuple[str, str, ConsumerSettings, str]:
    kind = body.type or "worker"
    if kind not in ("worker", "http_pull"):
        raise InvalidRequest(f"consumer type is {kind!r}; it must be 'worker' or 'http_pull'")
    script = body.script_name or body.script or ""
    if kind == "worker":
        if not script:
            raise InvalidRequest("a worker consumer needs a script_name")
        check.check_script_name(script)
    dlq = body.dead_letter_queue or ""
    if dlq:
        check.check_queue_name(dlq)
        if dlq == queue.name:
            raise InvalidRequest(f"queue {queue.name!r} cannot be its own dead letter queue")
    return kind, script, _consumer_settings(body, kind), dlq


async def create_consumer(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    kind, script, settings, dlq = _consumer_request(await read(request, wire.ConsumerRequest), queue)
    if dlq:
        ctx.principal.check_queue(dlq)
    info = await blocking(
        queue.add_consumer,
        kind,
        script_name=script,
        settings=settings,
        dead_letter_queue=dlq or None,
    )
    return ok(wire.consumer(info))


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
    return paged([wire.consumer(c) for c in consumers], page, per_page)


async def get_consumer(request: Request) -> Response:
    _, consumer = await _queue_consumer(context(request), request)
    return ok(wire.consumer(consumer))


async def update_consumer(request: Request) -> Response:
    ctx = context(request)
    queue, consumer = await _queue_consumer(ctx, request)
    body = await read(request, wire.ConsumerRequest)
    if body.type is None:
        body.type = consumer.type
    if consumer.type == "worker" and body.script_name is None:
        body.script_name = consumer.script_name
    kind, _, settings, dlq = _consumer_request(body, queue)
    if kind != consumer.type:
        raise InvalidRequest(f"a consumer's type cannot change ({consumer.type} to {kind}); delete it first")
    if dlq:
        ctx.principal.check_queue(dlq)
    info = await blocking(ctx.client.engine.update_consumer, consumer.consumer_id, settings, dlq)
    return ok(wire.consumer(info))


async def delete_consumer(request: Request) -> Response:
    ctx = context(request)
    _, consumer = await _queue_consumer(ctx, request)
    await blocking(ctx.client.engine.remove_consumer, consumer.consumer_id)
    return ok(None)


# -- messages -----------------------------------------------------------------------------------
def _traceparent(request: Request) -> str | None:
    """The W3C ``traceparent`` header of a send: the trace its messages are delivered in."""
    given = request.headers.get("traceparent")
    return None if given is None else check_traceparent(given, "the traceparent header", InvalidMessage)


async def push(request: Request) -> Response:
    ctx = context(request)
    message = await read(request, wire.PushedMessage)
    traceparent = _traceparent(request)

    def send() -> SendBatchResult:
        queue, info = ctx.message_lookup_sync(request.path_params["queue_id"])
        prepared = message.prepared(info.settings.delivery_delay)._replace(traceparent=traceparent)
        return ctx.client.engine.enqueue(queue.id, [prepared])

    return ok(wire.sent(await blocking(send)))


async def bulk_push(request: Request) -> Response:
    ctx = context(request)
    raw = await read_body(request)
    traceparent = _traceparent(request)

    def send() -> SendBatchResult:
        # Decoded here, on the thread pool: a batch is up to 256 KB of bodies, and the event loop
        # meanwhile reads the other connections' requests. The bodies stay raw JSON (wire.messages).
        body = wire.decode(raw, wire.BatchRequest)
        check.check_batch_count(len(body.messages))
        batch_delay = body.batch_delay()
        queue, info = ctx.message_lookup_sync(request.path_params["queue_id"])
        default = info.settings.delivery_delay if batch_delay is None else batch_delay
        prepared = [
            m.prepared(default, f" {i} of the batch")._replace(traceparent=traceparent)
            for i, m in enumerate(body.messages)
        ]
        total = sum(len(m.body) for m in prepared)
        if total > limits.MAX_BATCH_BYTES:
            raise BatchTooLarge(f"batch is {total} bytes; the limit is {limits.MAX_BATCH_BYTES}")
        return ctx.client.engine.enqueue(queue.id, prepared)

    return ok(wire.sent(await blocking(send)))


async def pull(request: Request) -> Response:
    ctx = context(request)
    body = await read(request, wire.PullRequest, required=False)
    vt = body.visibility_timeout if body.visibility_timeout_ms is None else body.visibility_timeout_ms

    def lease() -> wire.PullResult:
        queue, _ = ctx.message_lookup_sync(request.path_params["queue_id"])
        leased = queue.lease(body.batch_size, vt)
        metrics = wire.metrics(ctx.client.engine.metrics(queue.id))
        return wire.PullResult(metrics.backlog_count, [wire.pulled(m) for m in leased], wire.SendMetadata(metrics))

    return ok(await blocking(lease))


async def ack(request: Request) -> Response:
    ctx = context(request)
    body = await read(request, wire.AckRequest, required=False)
    acks = [a.lease_id for a in body.acks]
    given = [(r.lease_id, r.delay()) for r in body.retries]

    def settle() -> wire.AckResult:
        queue, _ = ctx.message_lookup_sync(request.path_params["queue_id"])
        result = queue.ack(acks, given)
        return wire.AckResult(result.ack_count, result.retry_count, result.warnings)

    return ok(await blocking(settle))


async def peek(request: Request) -> Response:
    ctx = context(request)
    size = (await read(request, wire.PeekRequest, required=False)).batch_size
    check.check_range("batch_size", size, 1, limits.MAX_BATCH_SIZE, InvalidRequest)

    def look() -> wire.PeekResult:
        queue, _ = ctx.message_lookup_sync(request.path_params["queue_id"])
        return wire.PeekResult([wire.peeked(m) for m in ctx.client.engine.peek(queue.id, size)])

    return ok(await blocking(look))


async def purge_messages(request: Request) -> Response:
    """Deleting single messages by ``ref`` is not something Conveyor's engines do: every ref gets a warning."""
    ctx = context(request)
    await ctx.queue(request.path_params["queue_id"])
    refs = (await read(request, wire.PurgeMessagesRequest)).names()
    warnings = dict.fromkeys(refs, "deleting single messages is not supported; use purge")
    return ok(wire.PurgeMessagesResult(errors=[], warnings=warnings))


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
