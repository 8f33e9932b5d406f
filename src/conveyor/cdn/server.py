"""``conveyor cdn serve``: the published files at ``/ajax/libs/{name}/{version}/{path}`` and the
libraries API (:mod:`conveyor.cdn.api`) on one port, as a bare ASGI app run by the project's uvicorn
set-up (:func:`conveyor.server.serve.uvicorn_config`).

Files, as cdnjs's origin serves them:

- the path must match ``/ajax/libs/{name}/{version}/{path}`` with a name of ``[a-zA-Z0-9._-]``,
  and be at most 512 characters, else 404; its extension must be one of the whitelist's (or
  ``avif``), else 403, and a ``.swf`` asked for with a query string is refused (403) too;
- a legacy name (cdnjs's nine aliases, ``pie`` → ``css3pie``, ``nicescroll`` →
  ``jquery.nicescroll``, ...) is served as the package it names;
- the version must be in the version list (:meth:`Catalog.published`), else 404: a version being
  published is not served until all of it is;
- ``Accept-Encoding`` with ``br`` (or ``*``) gets the ``.br`` object, else with ``gzip`` the ``.gz``
  one, else the stored original (``.woff2`` always as stored): byte for byte what was published,
  no compression or decompression on the request's path;
- headers: ``Cache-Control: public, max-age=30672000, immutable``, a strong ``ETag`` of the bytes
  sent (``If-None-Match`` answers 304), ``Last-Modified`` (the version's publication),
  ``Content-Type`` with ``charset=utf-8``, ``Vary: Accept-Encoding``, ``Access-Control-Allow-Origin:
  *``, ``Cross-Origin-Resource-Policy: cross-origin``, ``Timing-Allow-Origin: *``,
  ``X-Content-Type-Options: nosniff``.

A file's bytes come from an in-process cache (least recently used out past ``cache_bytes``), else
the primary bucket, else the mirror (:class:`~conveyor.cdn.sources.ObjectSource`: a circuit
breaker, so a primary that is down costs no request a timeout). A cached answer's head is built
once; a plain keep-alive ``GET`` of a cached file, or of one the mirror reads without waiting while
the breaker keeps reads off the primary (a small object of a local bucket), is answered by the
connection's protocol itself (:class:`FileProtocol`: no ASGI task, one write), everything else by
the ASGI app, each response's head written with its body.

A successful API answer is reused for 5 s by the process that made it (a missing library or
version is asked for again at once). ``/metrics`` shows the server's counters and the last audit's
counts in Prometheus' text format.
"""

from __future__ import annotations

import asyncio
import email.utils
import gc
import hashlib
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from types import FrameType
from typing import Any, ClassVar
from urllib.parse import parse_qs

import orjson
import uvicorn

import conveyor
from conveyor.cdn import api
from conveyor.cdn.metadata import SERVED_EXTENSIONS, UNCOMPRESSED_EXTENSIONS, Catalog, metadata_namespace
from conveyor.cdn.pipeline import account_of
from conveyor.cdn.sources import ObjectSource
from conveyor.cdn.store import CdnStore
from conveyor.server.http_protocol import ConnectionLimits, OneWriteProtocol, bounded_protocol, fit_open_files
from conveyor.server.serve import uvicorn_config

log = logging.getLogger("conveyor.cdn")

Scope = MutableMapping[str, Any]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]

DEFAULT_PORT = 8788
CACHE_BYTES = 256 * 1024 * 1024
MAX_KEY_CHARS = 512
NEGATIVE_SECONDS = 1.0  # a version not (yet) published is asked for again after this long
ANSWER_SECONDS = 5.0  # a successful API answer is reused this long
MAX_ANSWERS = 10_000
FILE_PATH = re.compile(r"^/ajax/libs/(?P<name>[a-zA-Z0-9._-]+)/(?P<version>[^/]+)/(?P<path>.+)$")
LIBRARY_PATH = re.compile(r"^/libraries/(?P<name>[^/]+)(?:/(?P<version>[^/]+))?/?$")
# cdnjs's nine legacy names (symlinks in its old tree, which takes no new ones): each is served as
# the package it points at (cdnjs/origin-worker's ALIASES).
ALIASES = {
    "pie": "css3pie",
    "zocial": "css-social-buttons",
    "angular-morris-chart": "angular-morris",
    "bower-angular-translate": "angular-translate",
    "fine-uploader": "file-uploader",
    "bower-angular-translate-loader-partial": "angular-translate-loader-partial",
    "bower-angular-translate-loader-url": "angular-translate-loader-url",
    "bower-angular-translate-loader-static-files": "angular-translate-loader-static-files",
    "nicescroll": "jquery.nicescroll",
}
MEDIA_TYPES = {
    "js": "application/javascript",
    "mjs": "application/javascript",
    "ts": "application/typescript",
    "wasm": "application/wasm",
    "map": "application/json",
    "swf": "application/x-shockwave-flash",
    "json": "application/json",
    "css": "text/css",
    "scss": "text/x-scss",
    "png": "image/png",
    "gif": "image/gif",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "svg": "image/svg+xml",
    "webp": "image/webp",
    "avif": "image/avif",
    "cur": "image/x-icon",
    "ttf": "font/ttf",
    "eot": "application/vnd.ms-fontobject",
    "woff": "font/woff",
    "woff2": "font/woff2",
    "otf": "font/otf",
    "aac": "audio/aac",
    "mp3": "audio/mpeg",
    "ogg": "audio/ogg",
    "lang": "text/plain",
    "hpb": "application/octet-stream",
}
FILE_HEADERS = [
    (b"cache-control", b"public, max-age=30672000, immutable"),
    (b"access-control-allow-origin", b"*"),
    (b"cross-origin-resource-policy", b"cross-origin"),
    (b"timing-allow-origin", b"*"),
    (b"x-content-type-options", b"nosniff"),
    (b"vary", b"Accept-Encoding"),
]
API_CORS = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-methods", b"GET, OPTIONS"),
    (b"access-control-allow-headers", b"Accept, Accept-Version, Content-Length, Content-MD5, Content-Type, Date"),
]
ENCODINGS = {"br": b"br", "gz": b"gzip"}
# Request headers that take a GET off FileProtocol's path: a body, a conditional request, an upgrade.
_NOT_PLAIN = frozenset(
    [b"content-length", b"transfer-encoding", b"expect", b"if-none-match", b"upgrade", b"connection"]
)


class CachedFile:
    """One representation of a file, ready to send: its body, its whole header list, and those
    headers as the bytes of a response head (``name: value\r\n`` each, and the blank line)."""

    __slots__ = ("body", "etag", "head", "headers")

    def __init__(self, body: bytes, headers: list[tuple[bytes, bytes]], etag: bytes) -> None:
        self.body = body
        self.headers = headers
        self.etag = etag
        self.head = b"".join(b"%s: %s\r\n" % header for header in headers) + b"\r\n"


class FileCache:
    """Least recently used representations, up to ``limit`` bytes of bodies."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self._entries: OrderedDict[tuple[str, str], CachedFile] = OrderedDict()

    def get(self, key: tuple[str, str]) -> CachedFile | None:
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def put(self, key: tuple[str, str], entry: CachedFile) -> None:
        if len(entry.body) > self.limit:
            return
        if key in self._entries:
            return
        self._entries[key] = entry
        self.size += len(entry.body)
        while self.size > self.limit:
            _, dropped = self._entries.popitem(last=False)
            self.size -= len(dropped.body)


def variant_of(accept_encoding: bytes, path: str) -> str:
    """``br``, ``gz`` or ``plain``: which stored object answers this request."""
    if path.endswith(UNCOMPRESSED_EXTENSIONS):
        return "plain"
    if b"br" in accept_encoding or b"*" in accept_encoding:
        return "br"
    if b"gzip" in accept_encoding:
        return "gz"
    return "plain"


def _header(scope: Scope, name: bytes) -> bytes:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return b""


async def _send(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _text(send: Send, status: int, message: str) -> None:
    body = message.encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"access-control-allow-origin", b"*"),
        (b"cache-control", b"public, max-age=3600" if status in (403, 404) else b"no-store"),
    ]
    await _send(send, status, headers, body)


class CdnApp:
    """The ASGI app of ``cdn serve``: the CDN of the account that the CDN of ``cv``'s account
    names public (``public_account``: its own unless ``cdn init --public-account`` said another;
    see the module docstring). :class:`~conveyor.cdn.CdnNotInitialized` if either has no CDN."""

    def __init__(
        self,
        cv: conveyor.Conveyor,
        *,
        cache_bytes: int = CACHE_BYTES,
        source: ObjectSource | None = None,
    ) -> None:
        self.store = CdnStore.open(cv.deployment)
        # The account whose CDN is served: the one this connection's CDN names public (cdn init
        # --public-account), through a connection of its own when it is another.
        self._public: conveyor.Conveyor | None = None
        try:
            public = self.store.settings(account_of(cv)).public_account
            if public != account_of(cv):
                cv = self._public = conveyor.connect(cv.url, account_id=public)
            self.settings = self.store.settings(public)
        except BaseException:
            self.store.close()
            if self._public is not None:
                self._public.close()
            raise
        self.cv = cv
        self.catalog = Catalog(metadata_namespace(cv))
        mirror = cv.bucket(self.settings.mirror_bucket) if self.settings.mirror_bucket else None
        self.source = source or ObjectSource(cv.bucket(self.settings.primary_bucket), mirror)
        self.cache = FileCache(cache_bytes)
        # version → its Last-Modified (its publication, which never changes)
        self._published: dict[tuple[str, str], bytes] = {}
        self._unpublished: dict[tuple[str, str], float] = {}  # version → when it was found missing
        self.responses: dict[int, int] = {}
        self.cache_hits = 0
        # Successful API answers by path and query, reused for ANSWER_SECONDS (the catalog changes
        # only when a version is published): (answered at, answer).
        self._answers: dict[tuple[str, bytes], tuple[float, api.Answer]] = {}

    def close(self) -> None:
        self.source.close()
        self.store.close()
        if self._public is not None:
            self._public.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            if path.startswith("/ajax/libs/"):
                await self.serve_file(scope, send)
            elif path == "/metrics":
                await self.serve_metrics(send)
            else:
                await self.serve_api(scope, send)
        elif scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return

    def _count(self, status: int) -> None:
        self.responses[status] = self.responses.get(status, 0) + 1

    # -- files ----------------------------------------------------------------------------------
    async def serve_file(self, scope: Scope, send: Send) -> None:
        path: str = scope["path"]
        method = scope["method"]
        if method != "GET" and method != "HEAD":
            self._count(405)
            return await _text(send, 405, "method not allowed")
        variant = variant_of(_header(scope, b"accept-encoding"), path)
        entry = self.cache.get((path, variant))
        if entry is None:
            refusal = self._refusal(path, scope.get("query_string", b""))
            if refusal is not None:
                self._count(refusal[0])
                return await _text(send, *refusal)
            try:
                entry = await self._load(path, variant)
            except conveyor.ConveyorError as exc:
                log.warning("cdn serve %s: %s", path, exc)
                self._count(503)
                return await _text(send, 503, "the file's buckets are unavailable")
            if entry is None:
                self._count(404)
                return await _text(send, 404, "not found")
        else:
            self.cache_hits += 1
        status = 200
        if entry.etag == _header(scope, b"if-none-match"):
            status = 304
        self._count(status)
        if status == 304 or method == "HEAD":
            headers = [h for h in entry.headers if h[0] != b"content-length"] if status == 304 else entry.headers
            return await _send(send, status, headers, b"")
        await _send(send, status, entry.headers, entry.body)

    def file_at_once(self, url: bytes, headers: list[tuple[bytes, bytes]]) -> CachedFile | None:
        """The file a plain ``GET`` of ``url`` (no query, no escapes, no body, no ``If-None-Match``)
        answers with 200 when it is at hand — cached, or read from the mirror without waiting
        (:meth:`~conveyor.cdn.sources.ObjectSource.read_nowait`) — counted as answered; None for
        anything else, which the ASGI path answers (:class:`FileProtocol`)."""
        if not url.startswith(b"/ajax/libs/") or b"?" in url or b"%" in url:
            return None
        accept_encoding = b""
        for name, value in headers:
            if name == b"accept-encoding":
                accept_encoding = value
            elif name in _NOT_PLAIN:
                return None
        path = url.decode("ascii")
        variant = variant_of(accept_encoding, path)
        entry = self.cache.get((path, variant))
        if entry is not None:
            self.cache_hits += 1
        else:
            entry = self._load_nowait(path, variant)
            if entry is None:
                return None
        self.responses[200] = self.responses.get(200, 0) + 1
        return entry

    def _refusal(self, path: str, query: bytes) -> tuple[int, str] | None:
        if len(path) - len("/ajax/libs/") > MAX_KEY_CHARS or FILE_PATH.match(path) is None:
            return (404, "not found")
        if any(segment in ("", ".", "..") for segment in path[len("/ajax/libs/") :].split("/")):
            return (404, "not found")
        extension = path.rsplit("/", 1)[-1].rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
        if extension not in SERVED_EXTENSIONS:
            return (403, "invalid file type")
        if extension == "swf" and query:
            return (403, "invalid request")
        return None

    async def _load(self, path: str, variant: str) -> CachedFile | None:
        found = FILE_PATH.match(path)
        assert found is not None
        name, version, file = found["name"], found["version"], found["path"]
        name = ALIASES.get(name, name)
        last_modified = await self._last_modified(name, version)
        if last_modified is None:
            return None
        body = await self.source.read(_object_key(name, version, file, variant))
        if body is None:
            return None
        return self._entry(path, variant, file, body, last_modified)

    def _load_nowait(self, path: str, variant: str) -> CachedFile | None:
        """:meth:`_load` of a file of a version known to be published, when the source has its bytes
        at once; None otherwise (the ASGI path loads it, or refuses it)."""
        found = FILE_PATH.match(path)
        if found is None or self._refusal(path, b"") is not None:
            return None
        name, version, file = found["name"], found["version"], found["path"]
        name = ALIASES.get(name, name)
        last_modified = self._published.get((name, version))
        if last_modified is None:
            return None
        body = self.source.read_nowait(_object_key(name, version, file, variant))
        if body is None:
            return None
        return self._entry(path, variant, file, body, last_modified)

    def _entry(self, path: str, variant: str, file: str, body: bytes, last_modified: bytes) -> CachedFile:
        """The representation of ``body`` (file ``file`` in ``variant``), kept in the cache."""
        extension = file.rsplit(".", 1)[-1].lower()
        etag = b'"' + hashlib.blake2b(body, digest_size=12).hexdigest().encode() + b'"'
        headers = [
            (b"content-type", MEDIA_TYPES.get(extension, "application/octet-stream").encode() + b"; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"etag", etag),
            (b"last-modified", last_modified),
            *FILE_HEADERS,
        ]
        if variant != "plain":
            headers.append((b"content-encoding", ENCODINGS[variant]))
        entry = CachedFile(body, headers, etag)
        self.cache.put((path, variant), entry)
        return entry

    async def _last_modified(self, name: str, version: str) -> bytes | None:
        """The version's ``Last-Modified``; None while it is not published."""
        key = (name, version)
        if key in self._published:
            return self._published[key]
        missing_since = self._unpublished.get(key)
        if missing_since is not None and time.monotonic() - missing_since < NEGATIVE_SECONDS:
            return None
        entry = await asyncio.get_running_loop().run_in_executor(None, self.catalog.published, name, version)
        if entry is None:
            if len(self._unpublished) > 100_000:
                self._unpublished.clear()
            self._unpublished[key] = time.monotonic()
            return None
        self._unpublished.pop(key, None)
        published_s = int(entry["published_ms"]) / 1000
        self._published[key] = email.utils.formatdate(published_s, usegmt=True).encode()
        return self._published[key]

    # -- API ------------------------------------------------------------------------------------
    async def serve_api(self, scope: Scope, send: Send) -> None:
        method = scope["method"]
        if method == "OPTIONS":
            self._count(204)
            return await _send(send, 204, [*API_CORS, (b"content-length", b"0")], b"")
        path: str = scope["path"]
        if method not in ("GET", "HEAD"):
            answer = api.not_found("Endpoint")
        elif path == "/health":
            self._count(200)
            return await _send(send, 200, [(b"content-type", b"text/plain"), (b"content-length", b"2")], b"OK")
        else:
            answer = await self._cached_answer(path, scope.get("query_string", b""))
        body = orjson.dumps(answer.body)
        headers = [
            (b"content-type", b"application/json; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            *API_CORS,
            *_cache_headers(answer.cache_seconds, answer.immutable),
        ]
        self._count(answer.status)
        await _send(send, answer.status, headers, b"" if method == "HEAD" else body)

    async def _cached_answer(self, path: str, query_string: bytes) -> api.Answer:
        key = (path, query_string)
        found = self._answers.get(key)
        if found is not None and time.monotonic() - found[0] < ANSWER_SECONDS:
            return found[1]
        query = parse_qs(query_string.decode("latin-1"), keep_blank_values=True)
        try:
            answer = await asyncio.get_running_loop().run_in_executor(None, self._answer, path, query)
        except conveyor.ConveyorError as exc:
            log.warning("cdn api %s: %s", path, exc)
            return api.Answer(500, {"error": True, "status": 500, "message": "An unexpected error occurred"}, -1)
        if answer.status == 200:  # a missing library or version may be published any moment
            if len(self._answers) >= MAX_ANSWERS:
                self._answers.clear()
            self._answers[key] = (time.monotonic(), answer)
        return answer

    def _answer(self, path: str, query: dict[str, list[str]]) -> api.Answer:
        if path in ("/libraries", "/libraries/"):
            return api.libraries(self.catalog, self._search, query)
        found = LIBRARY_PATH.match(path)
        if found is not None:
            if found["version"] is None:
                return api.library(self.catalog, found["name"], query)
            return api.library_version(self.catalog, found["name"], found["version"], query)
        if path in ("/whitelist", "/whitelist/"):
            return api.whitelist(query)
        if path in ("/stats", "/stats/"):
            return api.stats(self.catalog, query)
        return api.not_found("Endpoint")

    def _search(self, text: str, fields: frozenset[str]) -> list[str]:
        return self.store.search(self.settings.account, text, fields)

    # -- metrics --------------------------------------------------------------------------------
    async def serve_metrics(self, send: Send) -> None:
        audit = await asyncio.get_running_loop().run_in_executor(None, self.store.audit_counts, self.settings.account)
        lines = [
            "# HELP conveyor_cdn_responses_total Responses of this server by status.",
            "# TYPE conveyor_cdn_responses_total counter",
            *(f'conveyor_cdn_responses_total{{status="{s}"}} {n}' for s, n in sorted(self.responses.items())),
            "# HELP conveyor_cdn_cache_hits_total File requests answered from the in-process cache.",
            "# TYPE conveyor_cdn_cache_hits_total counter",
            f"conveyor_cdn_cache_hits_total {self.cache_hits}",
            "# HELP conveyor_cdn_cache_bytes Bytes of file bodies in the in-process cache.",
            "# TYPE conveyor_cdn_cache_bytes gauge",
            f"conveyor_cdn_cache_bytes {self.cache.size}",
            "# HELP conveyor_cdn_primary_failures_total Primary bucket reads that failed or were too slow.",
            "# TYPE conveyor_cdn_primary_failures_total counter",
            f"conveyor_cdn_primary_failures_total {self.source.primary_failures}",
            "# HELP conveyor_cdn_mirror_reads_total Reads sent to the mirror bucket.",
            "# TYPE conveyor_cdn_mirror_reads_total counter",
            f"conveyor_cdn_mirror_reads_total {self.source.mirror_reads}",
            "# HELP conveyor_cdn_primary_circuit_open 1 while no read tries the primary bucket.",
            "# TYPE conveyor_cdn_primary_circuit_open gauge",
            f"conveyor_cdn_primary_circuit_open {int(self.source.breaker.is_open)}",
            "# HELP conveyor_cdn_audit_objects Published objects by bucket and outcome at the last audit.",
            "# TYPE conveyor_cdn_audit_objects gauge",
            *(f'conveyor_cdn_audit_objects{{bucket="{b}",outcome="{o}"}} {n}' for b, o, n, _ in audit),
            "# HELP conveyor_cdn_audit_timestamp_seconds When the last audit ended.",
            "# TYPE conveyor_cdn_audit_timestamp_seconds gauge",
            *([f"conveyor_cdn_audit_timestamp_seconds {audit[0][3] / 1000:.3f}"] if audit else []),
        ]
        body = ("\n".join(lines) + "\n").encode()
        headers = [
            (b"content-type", b"text/plain; version=0.0.4; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
        ]
        await _send(send, 200, headers, body)


def _object_key(name: str, version: str, file: str, variant: str) -> str:
    """The bucket key of a file's ``variant`` (``plain``, ``br`` or ``gz``)."""
    return f"{name}/{version}/{file}" + ("" if variant == "plain" else f".{variant}")


def _cache_headers(seconds: int, immutable: bool) -> list[tuple[bytes, bytes]]:
    if seconds < 0:
        return [
            (b"expires", b"0"),
            (b"pragma", b"no-cache"),
            (b"cache-control", b"no-cache, no-store, must-revalidate"),
        ]
    control = f"public, max-age={seconds}" + (", immutable" if immutable else "")
    expires = email.utils.formatdate(time.time() + seconds, usegmt=True)
    return [(b"expires", expires.encode()), (b"cache-control", control.encode())]


class _Answered:
    """``FileProtocol.cycle`` after a request it answered itself: a complete response."""

    response_complete = True
    response_started = True
    disconnected = False
    keep_alive = True

    class message_event:
        @staticmethod
        def set() -> None:
            pass


_ANSWERED = _Answered()


class FileProtocol(OneWriteProtocol):
    """The connection protocol of ``cdn serve``: a plain keep-alive ``GET`` of a file at hand — in
    the process's cache, or read from the mirror without waiting (:meth:`CdnApp.file_at_once`) — is
    answered in the parser's callback: one write of uvicorn's default headers (its ``date``, once a
    second), the file's head and its body; no ASGI scope, task or header checks, which were most of
    a cached answer's Python time. Everything else — a file to be read from a bucket, a query,
    ``HEAD``, a conditional request, a pipelined request while one is in progress, a client not
    reading — takes the ASGI path (:class:`CdnApp`)."""

    files: ClassVar[CdnApp]
    # uvicorn's default header list (a new one each second, with its date) and its bytes: one
    # tuple, replaced whole, so servers running in threads of one process never mix two.
    _defaults: ClassVar[tuple[object, bytes]] = (None, b"")

    def on_headers_complete(self) -> None:
        entry = None
        if (
            (self.cycle is None or self.cycle.response_complete)
            and not self.flow.write_paused
            and self.parser.get_method() == b"GET"
            and self.parser.get_http_version() == "1.1"
            and self.parser.should_keep_alive()
        ):
            entry = self.files.file_at_once(self.url, self.headers)
        if entry is None:
            super().on_headers_complete()
            return
        self._in_head = False
        self._disarm()
        self.waiting.pop(self, None)
        self.cycle = _ANSWERED  # type: ignore[assignment]
        defaults = self.server_state.default_headers
        known = FileProtocol._defaults
        if known[0] is not defaults:
            known = FileProtocol._defaults = (defaults, b"".join(b"%s: %s\r\n" % header for header in defaults))
        self.transport.writelines([b"HTTP/1.1 200 OK\r\n", known[1], entry.head, entry.body])
        self.on_response_complete()


def server_config(app: CdnApp, host: str, port: int, limits: ConnectionLimits | None = None) -> uvicorn.Config:
    """The project's uvicorn set-up (:func:`conveyor.server.serve.uvicorn_config`) with ``app``'s
    :class:`FileProtocol`."""
    config = uvicorn_config(app, host, port, limits)
    config.http = bounded_protocol(limits or ConnectionLimits(), FileProtocol, files=app)
    return config


def serve(
    cv: conveyor.Conveyor,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    cache_bytes: int = CACHE_BYTES,
    processes: int = 1,
    on_ready: Callable[[int], None] | None = None,
) -> None:
    """Serve the account's CDN until SIGINT/SIGTERM; ``on_ready(port)`` once it listens.
    ``processes``: how many processes answer on the one listening socket (this one and
    ``processes - 1`` children, each with its own cache), for more than one core."""
    if not 1 <= processes <= 64:
        raise conveyor.InvalidRequest(f"processes: {processes} is not within 1..64")
    listener = socket.create_server((host, port), backlog=4096)
    listener.set_inheritable(True)
    command = [sys.executable, "-m", "conveyor.cdn.server", "--fd", str(listener.fileno())]
    command += ["--cache-bytes", str(cache_bytes), "--parent", str(os.getpid())]
    if cv.url:
        command += ["--url", cv.url]
    command += ["--account", account_of(cv)]
    children = [subprocess.Popen(command, pass_fds=[listener.fileno()]) for _ in range(processes - 1)]

    def stop_children() -> None:
        for child in children:
            if child.poll() is None:
                child.terminate()

    try:
        _run(cv, listener, cache_bytes, on_ready, on_exit=stop_children)
    finally:
        for child in children:
            child.terminate()
        for child in children:
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        listener.close()


def _run(
    cv: conveyor.Conveyor,
    listener: socket.socket,
    cache_bytes: int,
    on_ready: Callable[[int], None] | None,
    on_exit: Callable[[], None] | None = None,
) -> None:
    host, port = listener.getsockname()[:2]
    app = CdnApp(cv, cache_bytes=cache_bytes)
    server = uvicorn.Server(server_config(app, host, port, fit_open_files(ConnectionLimits())))
    if on_exit is not None:  # at the signal: uvicorn re-raises it once shut down, ending this process
        stop_serving = server.handle_exit

        def handle_exit(sig: int, frame: FrameType | None) -> None:
            on_exit()
            stop_serving(sig, frame)

        server.handle_exit = handle_exit  # type: ignore[method-assign]
    if on_ready is not None:

        def announce() -> None:
            while not server.started and not server.should_exit:
                time.sleep(0.02)
            if server.started:
                on_ready(int(port))

        threading.Thread(target=announce, daemon=True).start()
    # What start-up made (modules, the catalog, the buckets' clients) lives as long as the process:
    # kept out of the collector's scans, which were otherwise about a seventh of a loaded server's CPU.
    gc.freeze()
    try:
        server.run(sockets=[listener])
    finally:
        app.close()


def stop_when_orphaned(parent: int) -> None:
    """In a child process: SIGTERM itself (a graceful stop) once ``parent`` is gone, checked every
    second, so a parent killed with SIGKILL leaves no child serving or compressing."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True, name="orphan-watch").start()


def _child() -> None:
    """A serving process of :func:`serve`'s listening socket (``python -m conveyor.cdn.server``);
    it stops when its parent is gone."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--cache-bytes", type=int, required=True)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--url", default=None)
    parser.add_argument("--account", default=None)
    options = parser.parse_args()
    listener = socket.socket(fileno=options.fd)

    stop_when_orphaned(options.parent)
    with conveyor.connect(options.url, account_id=options.account) as cv:
        _run(cv, listener, options.cache_bytes, None)


if __name__ == "__main__":
    _child()
