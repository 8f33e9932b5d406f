"""Conveyor's own endpoints, under ``/conveyor/v1/accounts/{account_id}``: the engine primitives that
Cloudflare's API has no words for, so the remote transport (``conveyor.connect("http://...")``) can
run :class:`~conveyor.App` workers over HTTP: leases with a delivery policy, heartbeats (extend),
settle, release, counters, a purge that counts, redrive, and a long-poll ``wait``.

Bodies travel as base64 of the stored bytes, so what a remote producer stores is byte for byte what
an embedded one would. Their shapes are :mod:`conveyor.wire.engine`'s; their values are still
checked here: a remote client is not trusted to have checked.
"""

from __future__ import annotations

import base64
import time

import anyio
from starlette.requests import Request
from starlette.responses import Response

from conveyor import limits, wire
from conveyor.client import validation as check
from conveyor.codec import check_content_type, decode_json
from conveyor.engine.history import history_rows
from conveyor.errors import BatchTooLarge, InvalidMessage, InvalidRequest
from conveyor.model import DeliveryPolicy, NewMessage
from conveyor.server import worker_routes
from conveyor.server.access import CATALOG_WRITE, READ, WRITE, declared
from conveyor.server.envelope import ok, read
from conveyor.server.service import Context, blocking, context
from conveyor.tracing import check_traceparent

# A long-poll wait holds a thread; cap both its length and how many run at once, so waiting
# workers never starve the pool that answers everyone else.
MAX_WAIT_SECONDS = 5.0
MAX_HISTORY_MINUTES = 7 * 24 * 60
_waiters = anyio.CapacityLimiter(64)
# A held lease (no thread) lasts at most this long: under the 30 s after which the server closes an
# idle connection, so a held request never looks idle to it, and under the clients' read timeout.
MAX_HOLD_MS = 25_000
# A message that is due but not leasable yet (being dead-lettered, say) is looked at this often.
MIN_HOLD_SECONDS = 0.05


def _new_message(item: wire.EncodedMessage, i: int) -> NewMessage:
    kind = check_content_type(item.content_type)
    try:
        body = base64.b64decode(item.body, validate=True)
    except ValueError:  # binascii.Error, or a non-ASCII string
        raise InvalidMessage(f"message {i}: body must be base64") from None
    check.check_message_size(len(body))
    try:
        if kind == "json":
            decode_json(body)
        elif kind == "text":
            body.decode()
    except ValueError:
        raise InvalidMessage(f"message {i}: body is not valid {kind}") from None
    # No delay: the queue's delivery_delay, which the engine behind the server applies.
    delay = None if item.delay_seconds is None else check.check_delay(item.delay_seconds)
    traceparent = item.traceparent
    if traceparent is not None:
        check_traceparent(traceparent, f"message {i}: traceparent", InvalidMessage)
    return NewMessage(body, kind, delay, traceparent)


def _policy(given: wire.Policy, ctx: Context) -> DeliveryPolicy:
    dlq = given.dead_letter_queue or None
    if dlq is not None:
        # Dead letters land in (and may create) that queue: it must be one the token may touch.
        ctx.principal.check_queue(check.check_queue_name(dlq))
    return DeliveryPolicy(check.check_range("max_retries", given.max_retries, 0, 100), dlq)


def _visibility(visibility_ms: int) -> int:
    return check.check_range("visibility_ms", visibility_ms, 1, limits.MAX_VISIBILITY_TIMEOUT_MS, InvalidRequest)


async def enqueue(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    items = (await read(request, wire.EnqueueRequest)).messages
    check.check_batch_count(len(items))
    messages = [_new_message(item, i) for i, item in enumerate(items)]
    total = sum(len(m.body) for m in messages)
    if len(messages) > 1 and total > limits.MAX_BATCH_BYTES:
        raise BatchTooLarge(f"batch is {total} bytes; the limit is {limits.MAX_BATCH_BYTES}")
    sent = await blocking(ctx.client.engine.enqueue, queue.id, messages)
    m = sent.metrics
    return ok(wire.EnqueueResult(m.backlog_count, m.backlog_bytes, m.oldest_message_timestamp_ms, message_ids=sent.ids))


def _waiter(given: str | None, ctx: Context) -> str | None:
    """The client's name for its held leases, in its account's namespace (no one else can wake them)."""
    given = given or None
    if given is not None and not limits.ID_PATTERN.match(given):
        raise InvalidRequest(f"waiter {given!r} is malformed: expected 32 lowercase hex characters")
    return None if given is None else f"{ctx.account_id}/{given}"


async def lease(request: Request) -> Response:
    """Lease; with ``wait_ms``, an empty answer waits (held, no thread) until messages arrive or the
    time passes, so an idle remote worker makes one request per ``wait_ms`` instead of a poll loop."""
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    body = await read(request, wire.LeaseRequest)
    size = check.check_range("max_messages", body.max_messages, 1, limits.MAX_BATCH_SIZE, InvalidRequest)
    hold = check.check_range("wait_ms", body.wait_ms, 0, MAX_HOLD_MS, InvalidRequest) / 1000
    args = (queue.id, size, _visibility(body.visibility_ms), _policy(body.policy, ctx))
    waiter, engine = _waiter(body.waiter, ctx), ctx.client.engine
    deadline = time.monotonic() + hold
    while not (leased := await blocking(engine.lease, *args)) and (left := deadline - time.monotonic()) > 0:
        next_ms = await blocking(engine.next_visible_ms, queue.id)
        if next_ms is not None:  # a delay or a lease ends before the deadline: lease again then
            left = min(left, max(MIN_HOLD_SECONDS, (next_ms - engine.clock.now_ms()) / 1000))
        if await ctx.service.holds.hold(queue.id, left, waiter):
            break  # its client is stopping
    return ok(wire.LeaseResult([wire.leased(m) for m in leased]))


async def wake(request: Request) -> Response:
    """End the caller's held leases on the queue now (a remote worker stopping)."""
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    waiter = _waiter((await read(request, wire.WakeRequest)).waiter, ctx)
    if waiter is None:
        raise InvalidRequest("waiter is required: the id the held lease requests were sent with")
    ctx.service.holds.wake_waiter(queue.id, waiter)
    return ok(None)


async def extend(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    body = await read(request, wire.ExtendRequest)
    await blocking(ctx.client.engine.extend, queue.id, body.lease_ids, _visibility(body.visibility_ms))
    return ok(None)


async def settle(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    body = await read(request, wire.SettleRequest)
    retries = [(r.lease_id, check.check_delay(r.delay_seconds)) for r in body.retries]
    policy = _policy(body.policy, ctx)
    result = await blocking(ctx.client.engine.settle, queue.id, body.acks, retries, policy)
    return ok(wire.settled(result))


async def release(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    body = await read(request, wire.ReleaseRequest)
    await blocking(ctx.client.engine.release, queue.id, body.lease_ids)
    return ok(None)


async def counters(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    return ok(wire.counters(await blocking(ctx.client.engine.counters, queue.id)))


async def history(request: Request) -> Response:
    """The queue's recorded history over the last ``minutes`` (query parameter, 1 to 10080; 60)."""
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    given = request.query_params.get("minutes", "60")
    if not given.isdigit() or not 1 <= int(given) <= MAX_HISTORY_MINUTES:
        raise InvalidRequest(f"minutes is {given!r}; it must be a whole number from 1 to {MAX_HISTORY_MINUTES}")
    qualified = f"{ctx.account_id}/{queue.name}"

    def rows() -> list[wire.HistoryPoint]:
        since = ctx.client.engine.clock.now_ms() - int(given) * 60_000
        points = ctx.service.history().of_queue(qualified, since)
        return [wire.HistoryPoint(**row) for row in history_rows(points)]

    return ok(await blocking(rows))


async def next_visible(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    return ok(wire.NextVisible(await blocking(ctx.client.engine.next_visible_ms, queue.id)))


async def wait(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    timeout = (await read(request, wire.WaitRequest, required=False)).timeout
    if not 0 <= timeout <= MAX_WAIT_SECONDS:
        raise InvalidRequest(f"timeout is {timeout!r}; it must be a number of seconds from 0 to {MAX_WAIT_SECONDS:g}")
    await anyio.to_thread.run_sync(ctx.client.engine.wait, queue.id, float(timeout), limiter=_waiters)
    return ok(None)


async def redrive(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    target = await ctx.queue((await read(request, wire.RedriveRequest)).to_queue_id)
    return ok(wire.Moved(await blocking(ctx.client.engine.redrive, queue.id, target.id)))


async def purge(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    return ok(wire.Purged(await blocking(ctx.client.engine.purge, queue.id)))


async def add_shard(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    return ok(wire.Shards(await blocking(ctx.client.engine.add_shard, queue.id)))


PREFIX = "/conveyor/v1/accounts/{account_id}/queues/{queue_id}"

ROUTES = [
    declared(PREFIX + "/enqueue", enqueue, "POST", WRITE),
    declared(PREFIX + "/lease", lease, "POST", WRITE),
    declared(PREFIX + "/extend", extend, "POST", WRITE),
    declared(PREFIX + "/settle", settle, "POST", WRITE),
    declared(PREFIX + "/release", release, "POST", WRITE),
    declared(PREFIX + "/counters", counters, "GET", READ),
    declared(PREFIX + "/next-visible", next_visible, "GET", READ),
    declared(PREFIX + "/history", history, "GET", READ),
    # wait reads, but holds one of the few threads that waits may have: for consumers, which write.
    declared(PREFIX + "/wait", wait, "POST", WRITE),
    declared(PREFIX + "/wake", wake, "POST", WRITE),
    declared(PREFIX + "/redrive", redrive, "POST", WRITE),
    declared(PREFIX + "/purge", purge, "POST", WRITE),
    declared(PREFIX + "/shards", add_shard, "POST", CATALOG_WRITE),
    *worker_routes.ROUTES,
]
