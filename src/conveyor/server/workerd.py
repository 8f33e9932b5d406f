"""The send side of workerd's queue binding, so Workers run locally by workerd produce into Conveyor.

Point a binding's service at ``/workerd/accounts/{account_id}/queues/{queue_name}``; workerd then
calls, under that prefix:

- ``POST /message``: the raw body, ``X-Msg-Fmt: text|bytes|json|v8``, optional ``X-Msg-Delay-Secs``;
- ``POST /batch``: ``{"messages":[{"body":"<base64>","contentType":"json","delaySecs":N}]}``, optional
  batch-level ``X-Msg-Delay-Secs``;
- ``GET /metrics``: ``{"backlogCount", "backlogBytes", "oldestMessageTimestamp"}``.

Sends answer ``{"metadata":{"metrics":{...}}}``; refusals carry ``CF-Queues-Error-Code`` and
``CF-Queues-Error-Cause`` (and the usual envelope).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from conveyor import limits, wire
from conveyor.client import validation as check
from conveyor.codec import check_content_type
from conveyor.errors import BatchTooLarge, ConveyorError, InvalidMessage, InvalidRequest, MalformedJSON
from conveyor.model import NewMessage, QueueInfo
from conveyor.server.access import READ, WRITE, declared
from conveyor.server.envelope import JSONResponse, error_response, public_message, read_body, read_json
from conveyor.server.service import Context, blocking, context

Handler = Callable[[Request], Awaitable[Response]]


def _binding_errors(handler: Handler) -> Handler:
    """Answer refusals with workerd's error headers as well as the envelope."""

    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except ConveyorError as exc:
            response = error_response(exc)
            response.headers["CF-Queues-Error-Code"] = str(exc.code)
            response.headers["CF-Queues-Error-Cause"] = public_message(exc).encode("ascii", "replace").decode()
            return response

    return wrapped


def _delay(raw: str | None, default: int, *, batch: bool = False) -> int:
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidMessage(f"X-Msg-Delay-Secs is {raw!r}; it must be a whole number of seconds") from None
    return check.check_delay(value, batch=batch)


def _body(data: bytes, kind: str) -> NewMessage:
    """A body as workerd sends it: already serialised (JSON text, UTF-8 text, or raw bytes)."""
    if kind == "json":
        try:
            json.loads(data)
        except ValueError:
            raise MalformedJSON("the message body is not valid JSON") from None
    elif kind == "text":
        try:
            data.decode()
        except UnicodeDecodeError:
            raise InvalidMessage("a text message body must be UTF-8") from None
    check.check_message_size(len(data))
    return NewMessage(data, check_content_type(kind), 0)


async def _target(request: Request) -> tuple[Context, QueueInfo]:
    ctx = context(request)
    name = check.check_queue_name(request.path_params["queue_name"])
    ctx.principal.check_queue(name)
    return ctx, await blocking(ctx.client.engine.get_queue, name)


def _kind(value: Any) -> str:
    return check_content_type(value)


async def send_message(request: Request) -> Response:
    ctx, info = await _target(request)
    kind = _kind(request.headers.get("x-msg-fmt", "v8"))
    message = _body(await read_body(request), kind)
    delay = _delay(request.headers.get("x-msg-delay-secs"), info.settings.delivery_delay)
    stored = NewMessage(message.body, message.content_type, delay)
    sent = await blocking(ctx.client.engine.enqueue, info.queue_id, [stored])
    return JSONResponse(wire.binding_sent(sent.metrics))


async def send_batch(request: Request) -> Response:
    ctx, info = await _target(request)
    items = (await read_json(request)).get("messages")
    if not isinstance(items, list) or not items:
        raise InvalidRequest("messages must be a non-empty list")
    if len(items) > limits.MAX_BATCH_MESSAGES:
        check.prepare_batch(items, None)
    default = _delay(request.headers.get("x-msg-delay-secs"), info.settings.delivery_delay, batch=True)
    messages: list[NewMessage] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("body"), str):
            raise InvalidMessage(f"message {i} needs a base64 body")
        try:
            data = base64.b64decode(item["body"], validate=True)
        except ValueError:  # binascii.Error, or a non-ASCII string
            raise InvalidMessage(f"message {i}: body must be base64") from None
        body = _body(data, _kind(item.get("contentType", "v8")))
        delay = item.get("delaySecs")
        delay = default if delay is None else check.check_delay(delay)
        messages.append(NewMessage(body.body, body.content_type, delay))
    total = sum(len(m.body) for m in messages)
    if total > limits.MAX_BATCH_BYTES:
        raise BatchTooLarge(f"batch is {total} bytes; the limit is {limits.MAX_BATCH_BYTES}")
    sent = await blocking(ctx.client.engine.enqueue, info.queue_id, messages)
    return JSONResponse(wire.binding_sent(sent.metrics))


async def binding_metrics(request: Request) -> Response:
    ctx, info = await _target(request)
    return JSONResponse(wire.binding_metrics(await blocking(ctx.client.engine.metrics, info.queue_id)))


PREFIX = "/workerd/accounts/{account_id}/queues/{queue_name}"

ROUTES = [
    declared(PREFIX + "/message", send_message, "POST", WRITE, outer=_binding_errors),
    declared(PREFIX + "/batch", send_batch, "POST", WRITE, outer=_binding_errors),
    declared(PREFIX + "/metrics", binding_metrics, "GET", READ, outer=_binding_errors),
]
