"""Conveyor's own routes for a bucket's objects and rules, under
``/conveyor/v1/accounts/{account_id}/buckets/{bucket_name}``: what ``connect("http://...")``
uses for ``cv.bucket(name).put/get/...`` (:mod:`conveyor.storage.remote`).

An object's bytes travel raw: ``PUT .../objects/{key}`` takes them as the body (its
``content-type``, the JSON ``conveyor-metadata`` header, ``conveyor-only-if-absent: 1``), and
``GET .../objects/{key}`` streams them (``range: bytes=START-END``), its metadata in the JSON
``conveyor-object`` header (ASCII, escaped); ``GET .../info/{key}`` answers the metadata alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

import msgspec
from starlette.concurrency import iterate_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from conveyor.errors import InvalidRequest
from conveyor.server.access import Access, Scope, declared
from conveyor.server.envelope import ok, read, read_body
from conveyor.server.service import blocking, context
from conveyor.storage.bucket import Bucket
from conveyor.storage.model import ObjectInfo
from conveyor.wire import r2

B = "/conveyor/v1/accounts/{account_id}/buckets/{bucket_name}"
OBJECTS = B + "/objects"
OBJECT = OBJECTS + "/{key:path}"
# A put through the server is read whole before it is stored: larger objects go from the Python
# API of a process on the deployment, or straight to the bucket's S3 service.
MAX_OBJECT_BYTES = 256 * 1024 * 1024
READ = Access(Scope.ACCOUNT, read_only=True)
WRITE = Access(Scope.ACCOUNT)
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


async def _bucket(request: Request) -> Bucket:
    return await blocking(context(request).client.bucket, request.path_params["bucket_name"])


def object_header(info: ObjectInfo) -> str:
    return json.dumps(msgspec.to_builtins(r2.object_shape(info)), ensure_ascii=True, separators=(",", ":"))


async def get_bucket(request: Request) -> Response:
    b = await _bucket(request)
    return ok(r2.bucket_location(b.info))


async def delete_bucket(request: Request) -> Response:
    ctx = context(request)
    await blocking(ctx.client.delete_bucket, request.path_params["bucket_name"])
    return ok(None)


async def put_object(request: Request) -> Response:
    b = await _bucket(request)
    data = await read_body(request, MAX_OBJECT_BYTES)
    raw_metadata = request.headers.get("conveyor-metadata", "{}")
    try:
        metadata = json.loads(raw_metadata)
    except ValueError:
        raise InvalidRequest("the conveyor-metadata header is not a JSON object") from None
    only = request.headers.get("conveyor-only-if-absent", "0")
    if only not in ("0", "1"):
        raise InvalidRequest(f"conveyor-only-if-absent is {only!r}; it must be 0 or 1")
    info = await blocking(
        b.put,
        request.path_params["key"],
        data,
        content_type=request.headers.get("content-type"),
        metadata=metadata,
        only_if_absent=only == "1",
    )
    return ok(r2.object_shape(info))


def _range(request: Request) -> tuple[int, int] | None:
    raw = request.headers.get("range")
    if raw is None:
        return None
    match = _RANGE.match(raw.strip())
    if not match:
        raise InvalidRequest(f"range {raw!r}: give bytes=START-END (END inclusive) or bytes=START-")
    start = int(match.group(1))
    end = int(match.group(2)) + 1 if match.group(2) else 2**62
    if end <= start:
        raise InvalidRequest(f"range {raw!r} is empty")
    return start, end


async def get_object(request: Request) -> Response:
    b = await _bucket(request)
    body = await blocking(b.get, request.path_params["key"], _range(request))

    async def chunks() -> AsyncIterator[bytes]:
        async for chunk in iterate_in_threadpool(iter(body)):
            yield chunk

    headers = {"conveyor-object": object_header(body.info), "etag": f'"{body.info.etag}"'}
    return StreamingResponse(chunks(), status_code=200, media_type=body.info.content_type, headers=headers)


async def head_object(request: Request) -> Response:
    b = await _bucket(request)
    return ok(r2.object_shape(await blocking(b.head, request.path_params["key"])))


async def delete_object(request: Request) -> Response:
    b = await _bucket(request)
    return ok(r2.Deleted(await blocking(b.delete, request.path_params["key"])))


async def list_objects(request: Request) -> Response:
    b = await _bucket(request)
    prefix = request.query_params.get("prefix", "")
    after = request.query_params.get("start_after", "")
    raw = request.query_params.get("limit", "1000")
    if not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= 1000):
        raise InvalidRequest(f"limit is {raw!r}; it must be a whole number from 1 to 1000")
    limit = int(raw)

    def page() -> list[ObjectInfo]:
        found: list[ObjectInfo] = []
        for info in b.list(prefix=prefix, start_after=after):
            found.append(info)
            if len(found) == limit:
                break
        return found

    return ok(r2.ObjectList([r2.object_shape(o) for o in await blocking(page)]))


async def copy_object(request: Request) -> Response:
    b = await _bucket(request)
    body = await read(request, r2.CopyRequest)
    return ok(r2.object_shape(await blocking(b.copy, body.source, body.destination)))


async def add_notification(request: Request) -> Response:
    b = await _bucket(request)
    body = await read(request, r2.NotificationRuleRequest)
    rule = await blocking(b.add_notification, body.queue, body.actions, body.prefix, body.suffix, body.description)
    return ok(r2.notification_rule(rule))


async def list_notifications(request: Request) -> Response:
    b = await _bucket(request)
    return ok([r2.notification_rule(r) for r in await blocking(b.notifications)])


async def remove_notification(request: Request) -> Response:
    b = await _bucket(request)
    await blocking(b.remove_notification, request.path_params["rule_id"])
    return ok(None)


async def add_lifecycle_rule(request: Request) -> Response:
    b = await _bucket(request)
    body = await read(request, r2.LifecycleRuleRequest)
    return ok(r2.lifecycle_rule(await blocking(b.add_lifecycle_rule, body.max_age_seconds, body.prefix)))


async def list_lifecycle_rules(request: Request) -> Response:
    b = await _bucket(request)
    return ok([r2.lifecycle_rule(r) for r in await blocking(b.lifecycle_rules)])


async def remove_lifecycle_rule(request: Request) -> Response:
    b = await _bucket(request)
    await blocking(b.remove_lifecycle_rule, request.path_params["rule_id"])
    return ok(None)


ROUTES = [
    declared(B, get_bucket, "GET", READ),
    declared(B, delete_bucket, "DELETE", WRITE),
    declared(OBJECTS, list_objects, "GET", READ),
    declared(OBJECT, put_object, "PUT", WRITE),
    declared(OBJECT, get_object, "GET", READ),
    declared(B + "/info/{key:path}", head_object, "GET", READ),
    declared(OBJECT, delete_object, "DELETE", WRITE),
    declared(B + "/copy", copy_object, "POST", WRITE),
    declared(B + "/notifications", add_notification, "POST", WRITE),
    declared(B + "/notifications", list_notifications, "GET", READ),
    declared(B + "/notifications/{rule_id}", remove_notification, "DELETE", WRITE),
    declared(B + "/lifecycle", add_lifecycle_rule, "POST", WRITE),
    declared(B + "/lifecycle", list_lifecycle_rules, "GET", READ),
    declared(B + "/lifecycle/{rule_id}", remove_lifecycle_rule, "DELETE", WRITE),
]
