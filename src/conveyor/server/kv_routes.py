"""Workers KV's REST API, under ``/client/v4/accounts/{account_id}/storage/kv/namespaces``, in the
shapes of the ``cloudflare`` SDK's ``kv.namespaces.*`` (:mod:`conveyor.wire.kv`).

Every route reaches the whole account (a queue-scoped token may not call them); reads are open to
read-only tokens, writes are not. The server keeps one KV store for every account
(``Service.store``); each handler passes the path's account.

A value's bytes travel as they are. A value written here without the ``conveyor-kv-type`` header
is stored as ``bytes``; Conveyor's remote client sends the header (``text``, ``bytes``, ``json``)
so a value reads back as it was given, and a value read answers with it, with the metadata's JSON
(base64url) in ``conveyor-kv-metadata``: one round trip for ``get_with_metadata``.
"""

from __future__ import annotations

import base64
import binascii
import email.parser
import email.policy
import math
from collections.abc import Callable
from email.message import EmailMessage
from typing import Any, TypeVar

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from conveyor import wire
from conveyor.codec import decode_json
from conveyor.errors import InvalidRequest, MalformedJSON
from conveyor.server.access import Access, Scope, declared
from conveyor.server.envelope import JSONResponse, ok, read_body
from conveyor.server.service import Context, blocking, context
from conveyor.storage.kv import (
    KINDS,
    MAX_BULK_WRITE,
    MAX_VALUE_BYTES,
    Kind,
    KVStore,
    KVWrite,
    check_count,
    check_key,
    check_write,
    open_kv_store,
)
from conveyor.storage.kv_errors import InvalidKVExpiration, KVKeyNotFound
from conveyor.wire import kv as shapes

T = TypeVar("T")

KV_READ = Access(Scope.ACCOUNT, read_only=True)
KV_WRITE = Access(Scope.ACCOUNT)
NS = "/client/v4/accounts/{account_id}/storage/kv/namespaces"
ONE = NS + "/{namespace_id}"
KIND_HEADER = "conveyor-kv-type"
METADATA_HEADER = "conveyor-kv-metadata"
# A value's body: the value with room for a multipart envelope and its metadata.
MAX_VALUE_REQUEST_BYTES = MAX_VALUE_BYTES + 64 * 1024
# A bulk write's body: Cloudflare's 100 MB.
MAX_BULK_REQUEST_BYTES = 100 * 1000 * 1000
DEFAULT_PER_PAGE = 20
MAX_PER_PAGE = 1000


def _store(ctx: Context) -> KVStore:
    return ctx.service.store("kv", open_kv_store)


async def _call(request: Request, fn: Callable[[KVStore, Context], T]) -> T:
    ctx = context(request)
    return await blocking(fn, _store(ctx), ctx)


def _namespace_id(request: Request) -> str:
    return str(request.path_params["namespace_id"])


def _key_name(request: Request) -> str:
    return check_key(request.path_params["key_name"])


# -- namespaces ------------------------------------------------------------------------------------
def _whole(request: Request, name: str, default: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= high:
        raise InvalidRequest(f"{name} is {raw!r}; it must be a whole number from 1 to {high}")
    return int(raw)


def _choice(request: Request, name: str, choices: tuple[str, ...]) -> str:
    raw = request.query_params.get(name) or choices[0]
    if raw not in choices:
        raise InvalidRequest(f"{name} is {raw!r}; it must be one of {', '.join(choices)}")
    return raw


async def list_namespaces(request: Request) -> Response:
    page = _whole(request, "page", 1, 10**9)
    per_page = _whole(request, "per_page", DEFAULT_PER_PAGE, MAX_PER_PAGE)
    order = _choice(request, "order", ("title", "id"))
    direction = _choice(request, "direction", ("asc", "desc"))
    found = await _call(request, lambda store, ctx: store.list_namespaces(ctx.account_id))
    found.sort(key=lambda n: n.id if order == "id" else n.title, reverse=direction == "desc")
    chunk = found[(page - 1) * per_page : page * per_page]
    info = wire.ResultInfo(page, per_page, len(chunk), len(found), math.ceil(len(found) / per_page))
    return ok([shapes.namespace(n) for n in chunk], result_info=info)


async def create_namespace(request: Request) -> Response:
    body = wire.decode(await read_body(request), shapes.KVNamespaceRequest)
    info = await _call(request, lambda store, ctx: store.create_namespace(ctx.account_id, body.title))
    return ok(shapes.namespace(info))


async def get_namespace(request: Request) -> Response:
    namespace_id = _namespace_id(request)
    info = await _call(request, lambda store, ctx: store.get_namespace(ctx.account_id, namespace_id))
    return ok(shapes.namespace(info))


async def rename_namespace(request: Request) -> Response:
    namespace_id = _namespace_id(request)
    body = wire.decode(await read_body(request), shapes.KVNamespaceRequest)
    info = await _call(request, lambda store, ctx: store.rename_namespace(ctx.account_id, namespace_id, body.title))
    return ok(shapes.namespace(info))


async def delete_namespace(request: Request) -> Response:
    namespace_id = _namespace_id(request)
    await _call(request, lambda store, ctx: store.delete_namespace(ctx.account_id, namespace_id))
    return ok({})


# -- keys ------------------------------------------------------------------------------------------
async def list_keys(request: Request) -> Response:
    namespace_id = _namespace_id(request)
    query = request.query_params
    raw_limit = query.get("limit") or "1000"
    if not (raw_limit.isascii() and raw_limit.isdigit()):
        raise InvalidRequest(f"limit is {raw_limit!r}; it must be a whole number from 10 to 1000")
    limit = int(raw_limit)
    prefix, cursor = query.get("prefix", ""), query.get("cursor", "")
    page = await _call(
        request,
        lambda store, ctx: store.list(ctx.account_id, namespace_id, prefix=prefix, cursor=cursor, limit=limit),
    )
    envelope = shapes.KVKeysEnvelope(
        result=[shapes.key(k) for k in page.keys], result_info=shapes.KVCursorInfo(len(page.keys), page.cursor)
    )
    return JSONResponse(envelope)


async def get_value(request: Request) -> Response:
    namespace_id, key = _namespace_id(request), _key_name(request)
    found = await _call(request, lambda store, ctx: store.get(ctx.account_id, namespace_id, key))
    if found is None:
        raise KVKeyNotFound(f"get: key {key!r} not found")
    headers: dict[str, str] = {KIND_HEADER: found.kind}
    if found.expiration is not None:
        headers["expiration"] = str(found.expiration)
    if found.metadata is not None:
        headers[METADATA_HEADER] = base64.urlsafe_b64encode(wire.encode(found.metadata)).decode()
    return Response(found.data, media_type="application/octet-stream", headers=headers)


async def get_metadata(request: Request) -> Response:
    namespace_id, key = _namespace_id(request), _key_name(request)
    found = await _call(request, lambda store, ctx: store.get(ctx.account_id, namespace_id, key))
    if found is None:
        raise KVKeyNotFound(f"metadata: key {key!r} not found")
    return ok(found.metadata)


def _number(request: Request, name: str) -> float | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        return float(raw)
    except ValueError:
        raise InvalidKVExpiration(f"invalid {name} {raw!r}: expected a whole number of seconds") from None


def _kind(request: Request) -> Kind:
    raw = request.headers.get(KIND_HEADER, "bytes")
    if raw not in KINDS:
        raise InvalidRequest(f"{KIND_HEADER} is {raw!r}; it must be one of {', '.join(KINDS)}")
    return raw


def _multipart(content_type: str, body: bytes) -> tuple[bytes, Any]:
    """The ``value`` and ``metadata`` (JSON, or ``None``) of a multipart form."""
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1")
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    if not isinstance(message, EmailMessage) or not message.is_multipart():
        raise InvalidRequest("the multipart body does not parse")
    fields: dict[str, bytes] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str) or name not in ("value", "metadata"):
            raise InvalidRequest(f"a KV value's form has the fields 'value' and 'metadata', not {name!r}")
        payload = part.get_payload(decode=True)
        fields[name] = payload if isinstance(payload, bytes) else b""
    if "value" not in fields:
        raise InvalidRequest("a KV value's form needs the field 'value'")
    metadata = None
    if "metadata" in fields:
        try:
            metadata = decode_json(fields["metadata"])
        except ValueError as exc:
            raise MalformedJSON(f"the field 'metadata' is not valid JSON: {exc}") from None
    return fields["value"], metadata


async def put_value(request: Request) -> Response:
    namespace_id, key = _namespace_id(request), _key_name(request)
    body = await read_body(request, MAX_VALUE_REQUEST_BYTES)
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        data, metadata = _multipart(content_type, body)
    else:
        data, metadata = body, None
    expiration, ttl = _number(request, "expiration"), _number(request, "expiration_ttl")
    kind = _kind(request)

    def put(store: KVStore, ctx: Context) -> None:
        write = check_write(
            key, data, kind, metadata=metadata, expiration=expiration, expiration_ttl=ttl, now_ms=store.clock.now_ms()
        )
        store.put(ctx.account_id, namespace_id, write)

    await _call(request, put)
    return ok({})


async def delete_value(request: Request) -> Response:
    namespace_id, key = _namespace_id(request), _key_name(request)
    await _call(request, lambda store, ctx: store.delete(ctx.account_id, namespace_id, key))
    return ok({})


def _bulk_write(pair: shapes.KVBulkWrite, now_ms: int) -> KVWrite:
    kind: Kind
    if pair.base64:
        try:
            data, kind = base64.b64decode(pair.value, validate=True), "bytes"
        except (binascii.Error, ValueError):
            raise InvalidRequest(f"the value of key {pair.key!r} is not valid base64") from None
    else:
        data, kind = pair.value.encode("utf-8", errors="surrogatepass"), "text"
    return check_write(
        pair.key,
        data,
        pair.conveyor_kind or kind,
        metadata=pair.metadata,
        expiration=pair.expiration,
        expiration_ttl=pair.expiration_ttl,
        now_ms=now_ms,
    )


async def bulk_write(request: Request) -> Response:
    namespace_id = _namespace_id(request)
    pairs = wire.decode(await read_body(request, MAX_BULK_REQUEST_BYTES), list[shapes.KVBulkWrite])

    def put(store: KVStore, ctx: Context) -> None:
        check_count("a bulk write", len(pairs), MAX_BULK_WRITE)
        now_ms = store.clock.now_ms()
        store.put_many(ctx.account_id, namespace_id, [_bulk_write(p, now_ms) for p in pairs])

    await _call(request, put)
    return ok(shapes.KVBulkResult(len(pairs)))


async def bulk_delete(request: Request) -> Response:
    namespace_id = _namespace_id(request)
    keys = wire.decode(await read_body(request, MAX_BULK_REQUEST_BYTES), list[str])
    await _call(request, lambda store, ctx: store.delete_many(ctx.account_id, namespace_id, keys))
    return ok(shapes.KVBulkResult(len(keys)))


async def bulk_get(request: Request) -> Response:
    namespace_id = _namespace_id(request)
    body = wire.decode(await read_body(request), shapes.KVBulkGetRequest)
    found = await _call(request, lambda store, ctx: store.get_many(ctx.account_id, namespace_id, body.keys))
    values: dict[str, Any] = {}
    for name, value in found.items():
        if value is None:
            values[name] = None
            continue
        decoded = value.decoded("json" if body.type == "json" else "text")
        if body.with_metadata:
            expiration = value.expiration if value.expiration is not None else msgspec.UNSET
            values[name] = shapes.KVValueWithMetadata(decoded, value.metadata, expiration)
        else:
            values[name] = decoded
    return ok(shapes.KVBulkGetResult(values))


ROUTES = [
    declared(NS, list_namespaces, "GET", KV_READ),
    declared(NS, create_namespace, "POST", KV_WRITE),
    declared(ONE, get_namespace, "GET", KV_READ),
    declared(ONE, rename_namespace, "PUT", KV_WRITE),
    declared(ONE, delete_namespace, "DELETE", KV_WRITE),
    declared(ONE + "/keys", list_keys, "GET", KV_READ),
    declared(ONE + "/values/{key_name:path}", get_value, "GET", KV_READ),
    declared(ONE + "/values/{key_name:path}", put_value, "PUT", KV_WRITE),
    declared(ONE + "/values/{key_name:path}", delete_value, "DELETE", KV_WRITE),
    declared(ONE + "/metadata/{key_name:path}", get_metadata, "GET", KV_READ),
    declared(ONE + "/bulk", bulk_write, "PUT", KV_WRITE),
    declared(ONE + "/bulk/delete", bulk_delete, "POST", KV_WRITE),
    declared(ONE + "/bulk/get", bulk_get, "POST", KV_READ),
]
