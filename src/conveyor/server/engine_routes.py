"""Conveyor's own endpoints, under ``/conveyor/v1/accounts/{account_id}``: the engine primitives that
Cloudflare's API has no words for, so the remote transport (``conveyor.connect("http://...")``) can
run :class:`~conveyor.App` workers over HTTP: leases with a delivery policy, heartbeats (extend),
settle, release, counters, a purge that counts, redrive, and a long-poll ``wait``.

Bodies travel as base64 of the stored bytes, so what a remote producer stores is byte for byte what
an embedded one would. Everything is still checked here: a remote client is not trusted to have
checked.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response

from conveyor import limits, shapes
from conveyor.client import validation as check
from conveyor.codec import check_content_type, decode_json
from conveyor.errors import BatchTooLarge, InvalidMessage, InvalidRequest
from conveyor.model import DeliveryPolicy, NewMessage, StoredMessage
from conveyor.server import worker_routes
from conveyor.server.access import CATALOG_WRITE, READ, WRITE, declared
from conveyor.server.envelope import array, known, mapping, ok, read_json, text, whole
from conveyor.server.service import Context, blocking, context

# A long-poll wait holds a thread; cap both its length and how many run at once, so waiting
# workers never starve the pool that answers everyone else.
MAX_WAIT_SECONDS = 5.0
_waiters = anyio.CapacityLimiter(64)
# A held lease (no thread) lasts at most this long: under the 30 s after which the server closes an
# idle connection, so a held request never looks idle to it, and under the clients' read timeout.
MAX_HOLD_MS = 25_000
# A message that is due but not leasable yet (being dead-lettered, say) is looked at this often.
MIN_HOLD_SECONDS = 0.05


# The fields each body may have (what the remote transport, client/http.py, sends): anything else is
# refused by name, never ignored.
ENQUEUE = frozenset({"messages"})
MESSAGE = frozenset({"body", "content_type", "delay_seconds"})
POLICY = frozenset({"max_retries", "dead_letter_queue"})
LEASE = frozenset({"max_messages", "visibility_ms", "policy", "wait_ms", "waiter"})
WAKE = frozenset({"waiter"})
EXTEND = frozenset({"lease_ids", "visibility_ms"})
SETTLE = frozenset({"acks", "retries", "policy"})
RETRY = frozenset({"lease_id", "delay_seconds"})
RELEASE = frozenset({"lease_ids"})
WAIT = frozenset({"timeout"})
REDRIVE = frozenset({"to_queue_id"})


def _encoded(m: StoredMessage) -> dict[str, Any]:
    return {
        "id": m.id,
        "timestamp_ms": m.timestamp_ms,
        "body": base64.b64encode(m.body).decode(),
        "content_type": m.content_type,
        "attempts": m.attempts,
        "lease_id": m.lease_id,
    }


def _new_message(item: Any, i: int) -> NewMessage:
    if not isinstance(item, dict):
        raise InvalidMessage(f"message {i} must be an object")
    known(item, MESSAGE, f"message {i}")
    kind = check_content_type(item.get("content_type", "json"))
    try:
        body = base64.b64decode(text(item, "body", ""), validate=True)
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
    delay = None if item.get("delay_seconds") is None else check.check_delay(whole(item, "delay_seconds"))
    return NewMessage(body, kind, delay)


def _policy(body: Mapping[str, Any], ctx: Context) -> DeliveryPolicy:
    given = known(mapping(body, "policy"), POLICY, "policy")
    dlq = text(given, "dead_letter_queue") or None
    if dlq is not None:
        # Dead letters land in (and may create) that queue: it must be one the token may touch.
        ctx.principal.check_queue(check.check_queue_name(dlq))
    retries = check.check_range("max_retries", whole(given, "max_retries", limits.DEFAULT_MAX_RETRIES), 0, 100)
    return DeliveryPolicy(retries, dlq)


def _strings(body: Mapping[str, Any], key: str) -> list[str]:
    items = array(body, key)
    if not all(isinstance(i, str) for i in items):
        raise InvalidRequest(f"{key} must be a list of strings")
    return items


def _visibility(body: Mapping[str, Any]) -> int:
    vt = whole(body, "visibility_ms", limits.DEFAULT_VISIBILITY_TIMEOUT_MS)
    return check.check_range("visibility_ms", vt, 1, limits.MAX_VISIBILITY_TIMEOUT_MS, InvalidRequest)


async def enqueue(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    items = array(known(await read_json(request), ENQUEUE, "the body"), "messages")
    if not 1 <= len(items) <= limits.MAX_BATCH_MESSAGES:
        check.prepare_batch(items, None)  # the standard refusal for an empty or long batch
    messages = [_new_message(item, i) for i, item in enumerate(items)]
    total = sum(len(m.body) for m in messages)
    if len(messages) > 1 and total > limits.MAX_BATCH_BYTES:
        raise BatchTooLarge(f"batch is {total} bytes; the limit is {limits.MAX_BATCH_BYTES}")
    sent = await blocking(ctx.client.engine.enqueue, queue.id, messages)
    return ok({**shapes.metrics(sent.metrics), "message_ids": sent.ids})


def _waiter(body: Mapping[str, Any], ctx: Context) -> str | None:
    """The client's name for its held leases, in its account's namespace (no one else can wake them)."""
    given = text(body, "waiter") or None
    if given is not None and not limits.ID_PATTERN.match(given):
        raise InvalidRequest(f"waiter {given!r} is malformed: expected 32 lowercase hex characters")
    return None if given is None else f"{ctx.account_id}/{given}"


async def lease(request: Request) -> Response:
    """Lease; with ``wait_ms``, an empty answer waits (held, no thread) until messages arrive or the
    time passes, so an idle remote worker makes one request per ``wait_ms`` instead of a poll loop."""
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    body = known(await read_json(request), LEASE, "the body")
    size = check.check_range("max_messages", whole(body, "max_messages", 1), 1, limits.MAX_BATCH_SIZE, InvalidRequest)
    hold = check.check_range("wait_ms", whole(body, "wait_ms", 0), 0, MAX_HOLD_MS, InvalidRequest) / 1000
    args = (queue.id, size, _visibility(body), _policy(body, ctx))
    waiter, engine = _waiter(body, ctx), ctx.client.engine
    deadline = time.monotonic() + hold
    while not (leased := await blocking(engine.lease, *args)) and (left := deadline - time.monotonic()) > 0:
        next_ms = await blocking(engine.next_visible_ms, queue.id)
        if next_ms is not None:  # a delay or a lease ends before the deadline: lease again then
            left = min(left, max(MIN_HOLD_SECONDS, (next_ms - engine.clock.now_ms()) / 1000))
        if await ctx.service.holds.hold(queue.id, left, waiter):
            break  # its client is stopping
    return ok({"messages": [_encoded(m) for m in leased]})


async def wake(request: Request) -> Response:
    """End the caller's held leases on the queue now (a remote worker stopping)."""
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    waiter = _waiter(known(await read_json(request), WAKE, "the body"), ctx)
    if waiter is None:
        raise InvalidRequest("waiter is required: the id the held lease requests were sent with")
    ctx.service.holds.wake_waiter(queue.id, waiter)
    return ok(None)


async def extend(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    body = known(await read_json(request), EXTEND, "the body")
    await blocking(ctx.client.engine.extend, queue.id, _strings(body, "lease_ids"), _visibility(body))
    return ok(None)


async def settle(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    body = known(await read_json(request), SETTLE, "the body")
    retries: list[tuple[str, int]] = []
    for item in array(body, "retries"):
        if not isinstance(item, dict) or not isinstance(item.get("lease_id"), str):
            raise InvalidRequest("each retry must be {lease_id, delay_seconds}")
        known(item, RETRY, "a retry")
        retries.append((item["lease_id"], check.check_delay(whole(item, "delay_seconds", 0))))
    result = await blocking(ctx.client.engine.settle, queue.id, _strings(body, "acks"), retries, _policy(body, ctx))
    return ok(
        {
            "acked": result.acked,
            "retried": result.retried,
            "dead_lettered": result.dead_lettered,
            "dropped": result.dropped,
            "warnings": result.warnings,
        }
    )


async def release(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    body = known(await read_json(request), RELEASE, "the body")
    await blocking(ctx.client.engine.release, queue.id, _strings(body, "lease_ids"))
    return ok(None)


async def counters(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    return ok(shapes.counters(await blocking(ctx.client.engine.counters, queue.id)))


async def next_visible(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    return ok({"next_visible_ms": await blocking(ctx.client.engine.next_visible_ms, queue.id)})


async def wait(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    body = known(await read_json(request, required=False), WAIT, "the body")
    timeout = body.get("timeout", 1.0)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not 0 <= timeout <= MAX_WAIT_SECONDS:
        raise InvalidRequest(f"timeout is {timeout!r}; it must be a number of seconds from 0 to {MAX_WAIT_SECONDS:g}")
    await anyio.to_thread.run_sync(ctx.client.engine.wait, queue.id, float(timeout), limiter=_waiters)
    return ok(None)


async def redrive(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    target = await ctx.queue(text(known(await read_json(request), REDRIVE, "the body"), "to_queue_id", ""))
    return ok({"moved": await blocking(ctx.client.engine.redrive, queue.id, target.id)})


async def purge(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    return ok({"purged": await blocking(ctx.client.engine.purge, queue.id)})


async def add_shard(request: Request) -> Response:
    ctx = context(request)
    queue = await ctx.queue(request.path_params["queue_id"])
    return ok({"shards": await blocking(ctx.client.engine.add_shard, queue.id)})


PREFIX = "/conveyor/v1/accounts/{account_id}/queues/{queue_id}"

ROUTES = [
    declared(PREFIX + "/enqueue", enqueue, "POST", WRITE),
    declared(PREFIX + "/lease", lease, "POST", WRITE),
    declared(PREFIX + "/extend", extend, "POST", WRITE),
    declared(PREFIX + "/settle", settle, "POST", WRITE),
    declared(PREFIX + "/release", release, "POST", WRITE),
    declared(PREFIX + "/counters", counters, "GET", READ),
    declared(PREFIX + "/next-visible", next_visible, "GET", READ),
    # wait reads, but holds one of the few threads that waits may have: for consumers, which write.
    declared(PREFIX + "/wait", wait, "POST", WRITE),
    declared(PREFIX + "/wake", wake, "POST", WRITE),
    declared(PREFIX + "/redrive", redrive, "POST", WRITE),
    declared(PREFIX + "/purge", purge, "POST", WRITE),
    declared(PREFIX + "/shards", add_shard, "POST", CATALOG_WRITE),
    *worker_routes.ROUTES,
]
