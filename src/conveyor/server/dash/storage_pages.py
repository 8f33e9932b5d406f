"""The dashboard's buckets and KV pages (read-only): an account's buckets, a bucket's objects by
folder (``/`` as the delimiter) a page at a time, one object's metadata and its download, the KV
namespaces, a namespace's keys a page at a time with a prefix filter, and one key's value shown by
its kind. Everything goes through the storage's public API (``cv.list_buckets``, ``cv.bucket``,
``Bucket.list`` / ``head`` / ``get``, ``cv.list_kv_namespaces``, ``cv.kv_by_id``, ``list_page``,
``get_value``); a bucket's credentials are never read, so never shown."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from conveyor.client.sync import Conveyor
from conveyor.errors import InvalidRequest
from conveyor.server.dash import views
from conveyor.server.dash.pages import SECURITY_HEADERS, Visit, account_client, page, render, when
from conveyor.server.service import blocking
from conveyor.storage.bucket import Bucket
from conveyor.storage.kv import KVValue
from conveyor.storage.kv_errors import KVKeyNotFound
from conveyor.storage.model import ObjectInfo
from conveyor.storage.names import check_bucket_name, check_key, check_prefix

DELIMITER = "/"
LIST_ROWS = 100  # folders and objects, or KV keys, a page shows
LAST_CHARACTER = "\U0010ffff"  # after every key under a folder: where the next page goes on
DOWNLOAD_HEADERS = {
    **SECURITY_HEADERS,
    # An object is downloaded, never shown as a page of this origin, whatever its content type says.
    "content-security-policy": "default-src 'none'; sandbox",
}


@dataclass(frozen=True, slots=True)
class Entry:
    """A line of a bucket's listing: a folder (``info`` None; ``name`` ends with the delimiter) or
    an object. ``cursor`` is where a listing continuing after it starts."""

    name: str
    info: ObjectInfo | None
    cursor: str


def browse(bucket: Bucket, prefix: str, after: str, limit: int) -> tuple[list[Entry], str]:
    """The folders and objects directly under ``prefix`` after ``after``, at most ``limit``, and
    the cursor of the next page (``""`` when none). A folder is listed once: the listing then
    skips past every key under it."""
    entries: list[Entry] = []
    start = after
    while len(entries) <= limit:
        skipped = False
        for info in bucket.list(prefix=prefix, start_after=start):
            rest = info.key[len(prefix) :]
            cut = rest.find(DELIMITER)
            if cut >= 0:
                folder = prefix + rest[: cut + 1]
                start = folder + LAST_CHARACTER
                entries.append(Entry(folder, None, start))
                skipped = True
                break
            entries.append(Entry(info.key, info, info.key))
            start = info.key
            if len(entries) > limit:
                break
        if not skipped:
            break
    more = len(entries) > limit
    entries = entries[:limit]
    return entries, entries[-1].cursor if more and entries else ""


def _folders(prefix: str) -> list[tuple[str, str]]:
    """The breadcrumb of ``prefix``: each folder's name and its own prefix."""
    parts = prefix.split(DELIMITER)[:-1]
    return [(part + DELIMITER, DELIMITER.join(parts[: n + 1]) + DELIMITER) for n, part in enumerate(parts)]


def _bucket(request: Request, visit: Visit) -> tuple[str, Conveyor, Bucket]:
    account, client = account_client(request, visit, "buckets")
    return account, client, client.bucket(check_bucket_name(request.path_params["bucket"]))


@page
async def buckets(request: Request, visit: Visit) -> Response:
    def context() -> dict[str, Any]:
        account, client = account_client(request, visit, "buckets")
        return {"account": account, "visit": visit, "buckets": client.list_buckets()}

    return render("buckets.html", **await blocking(context))


@page
async def bucket_page(request: Request, visit: Visit) -> Response:
    def context() -> dict[str, Any]:
        account, _, bucket = _bucket(request, visit)
        prefix = check_prefix(request.query_params.get("prefix", ""))
        after = check_prefix(request.query_params.get("after", ""), "after")
        entries, cursor = browse(bucket, prefix, after, LIST_ROWS)
        return {
            "account": account,
            "visit": visit,
            "bucket": bucket.info,
            "prefix": prefix,
            "after": after,
            "folders": _folders(prefix),
            "entries": entries,
            "cursor": cursor,
        }

    return render("bucket.html", **await blocking(context))


@page
async def object_page(request: Request, visit: Visit) -> Response:
    def context() -> dict[str, Any]:
        account, _, bucket = _bucket(request, visit)
        info = bucket.head(check_key(request.path_params["key"]))
        parent = info.key.rpartition(DELIMITER)[0]
        return {
            "account": account,
            "visit": visit,
            "bucket": bucket.info,
            "object": info,
            "parent": parent + DELIMITER if parent else "",
        }

    return render("object.html", **await blocking(context))


@page
async def download(request: Request, visit: Visit) -> Response:
    """The object's bytes, as an attachment of type ``application/octet-stream`` (its own content
    type is not trusted to be shown by this origin), read through the session's account."""

    def opened() -> tuple[str, Iterator[bytes]]:
        _, _, bucket = _bucket(request, visit)
        body = bucket.get(check_key(request.path_params["key"]))
        return body.key, iter(body)

    key, chunks = await blocking(opened)
    name = key.rpartition(DELIMITER)[2]
    ascii_name = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:100] or "object"
    disposition = f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{urllib.parse.quote(name, safe='')}"
    return StreamingResponse(
        chunks,
        media_type="application/octet-stream",
        headers={**DOWNLOAD_HEADERS, "content-disposition": disposition},
    )


# -- KV ----------------------------------------------------------------------------------------
@page
async def namespaces(request: Request, visit: Visit) -> Response:
    def context() -> dict[str, Any]:
        account, client = account_client(request, visit, "KV namespaces")
        return {"account": account, "visit": visit, "namespaces": client.list_kv_namespaces()}

    return render("kv.html", **await blocking(context))


@page
async def namespace_page(request: Request, visit: Visit) -> Response:
    def context() -> dict[str, Any]:
        account, client = account_client(request, visit, "KV namespaces")
        kv = client.kv_by_id(request.path_params["namespace_id"])
        prefix = request.query_params.get("prefix", "")
        cursor = request.query_params.get("cursor", "")
        found = kv.list_page(prefix=prefix, cursor=cursor, limit=LIST_ROWS)
        return {
            "account": account,
            "visit": visit,
            "namespace": kv.info,
            "prefix": prefix,
            "keys": [(key, views.show_json(key.metadata)) for key in found.keys],
            "cursor": "" if found.list_complete else found.cursor,
            "first": not cursor,
            "when": when,
        }

    return render("kv_namespace.html", **await blocking(context))


def _kind(value: KVValue, asked: str) -> str:
    if asked in ("", "auto"):
        return value.kind
    if asked not in ("text", "json", "bytes"):
        raise InvalidRequest(f"as: {asked!r} is not text, json or bytes")
    return asked


@page
async def kv_value(request: Request, visit: Visit) -> Response:
    def context() -> dict[str, Any]:
        account, client = account_client(request, visit, "KV namespaces")
        kv = client.kv_by_id(request.path_params["namespace_id"])
        key = request.path_params["key"]
        value = kv.get_value(key)
        if value is None:
            raise KVKeyNotFound(f"the namespace has no key {key[:200]!r}")
        kind = _kind(value, request.query_params.get("as", ""))
        return {
            "account": account,
            "visit": visit,
            "namespace": kv.info,
            "key": key,
            "value": value,
            "kind": kind,
            "body": views.show_data(value.data, kind),
            "metadata": views.show_json(value.metadata),
            "when": when,
        }

    return render("kv_value.html", **await blocking(context))
