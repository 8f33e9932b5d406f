"""Cloudflare's v4 envelope, its errors, and the reading of request bodies.

Every answer is ``{"success", "errors", "messages", "result"}`` (lists add ``result_info``). Errors
carry Cloudflare's code, the HTTP status of the :class:`~conveyor.errors.ConveyorError` raised, the
header ``x-should-retry: false`` unless retrying can help (the Python SDK would otherwise retry
408/409/429/5xx by itself: a 409 ``ConsumerExists`` must not be retried, a 429 may), and
``conveyor-error`` naming the exception class, so the remote transport raises the same class.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from conveyor.client.validation import unknown_fields
from conveyor.codec import decode_json, encode_json
from conveyor.errors import ConveyorError, InvalidRequest, MalformedJSON

log = logging.getLogger("conveyor.server")

# The largest request body read: a full batch (256 KB of bodies) with room for JSON escaping and
# base64. Larger bodies are refused from their Content-Length, or as soon as the stream passes it.
MAX_REQUEST_BYTES = 2 * 1024 * 1024


class RequestTooLarge(InvalidRequest):
    code = 10205
    status = 413


class JSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        # orjson under json's rules (conveyor.codec): a pull answer is 100 base64 bodies of ~1.4 KB.
        return encode_json(content)


def ok(result: Any, status: int = 200, result_info: Mapping[str, int] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"success": True, "errors": [], "messages": [], "result": result}
    if result_info is not None:
        body["result_info"] = dict(result_info)
    return JSONResponse(body, status_code=status)


def error_body(code: int, message: str) -> dict[str, Any]:
    return {"success": False, "errors": [{"code": code, "message": message}], "messages": [], "result": None}


# Refusals that asking again can cure (overload, a storage hiccup) are left to the SDK's retries.
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 507})


# An absolute file path (two or more segments) inside a message; a URL's "//host/..." is not one.
_FILE_PATH = re.compile(r"(?<![\w/:.~-])/(?:[^\s/'\"():,;]+/)+([^\s/'\"():,;]+)")


def public_message(exc: ConveyorError) -> str:
    """``exc``'s message with every absolute file path cut to its last part: where the server keeps
    its files is the operator's business, not a tenant's."""
    return _FILE_PATH.sub(r"\1", exc.message)


def error_response(exc: ConveyorError) -> JSONResponse:
    """``exc`` in the envelope: the one place a refusal leaves the server. A server error, or one
    that names a file (CorruptStorage, StorageFull, ...), is logged here in full; the answer has
    no paths."""
    message = public_message(exc)
    if exc.status >= 500:
        log.error("request failed: %s", exc)
    elif message != exc.message:
        log.warning("request refused: %s", exc)
    headers = {"conveyor-error": type(exc).__name__}
    if exc.status not in RETRYABLE_STATUSES:
        headers["x-should-retry"] = "false"
    if exc.retry_after is not None:
        # Whole seconds, as HTTP has them (an overloaded queue's 10250, a full one's 10251).
        headers["retry-after"] = str(max(1, math.ceil(exc.retry_after)))
    return JSONResponse(error_body(exc.code, message), status_code=exc.status, headers=headers)


async def read_body(request: Request, limit: int = MAX_REQUEST_BYTES) -> bytes:
    """The request body, refused with 413 once it passes ``limit`` (before it is read whole)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestTooLarge(f"request body is {declared} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestTooLarge(f"request body is over {limit} bytes; the limit is {limit}")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request, *, required: bool = True) -> dict[str, Any]:
    """The request's JSON object; 10208 when it does not parse, 10207 when it is not an object."""
    return parse_json(await read_body(request), required=required)


def parse_json(raw: bytes, *, required: bool = True) -> dict[str, Any]:
    """:func:`read_json` of a body already read (a large one is parsed off the event loop)."""
    if not raw.strip():
        if required:
            raise InvalidRequest("the request needs a JSON object body")
        return {}
    try:
        value = decode_json(raw)
    except (ValueError, RecursionError) as exc:
        raise MalformedJSON(f"request body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidRequest(f"request body must be a JSON object, not {type(value).__name__}")
    return value


# -- typed fields ---------------------------------------------------------------------------------
def known(obj: Mapping[str, Any], allowed: frozenset[str], what: str) -> Mapping[str, Any]:
    """``obj``, if every key is one of ``allowed``: a misspelt or foreign field is refused (10207),
    never ignored."""
    if not allowed.issuperset(obj):
        unknown = unknown_fields(obj, allowed)
        raise InvalidRequest(f"{what} has {unknown}; it takes {', '.join(sorted(allowed))}")
    return obj


def integral(value: Any) -> Any:
    """A JSON number that is whole (``5.0``) as an int; anything else as it is, for the check that
    names the field to refuse with its own code."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def whole(obj: Mapping[str, Any], key: str, default: Any = None) -> Any:
    """``obj[key]`` as an int (JSON numbers like ``5.0`` included); 10207 for any other type."""
    value = obj.get(key)
    if value is None:
        return default
    if not _is_number(value) or value != value or value in (float("inf"), float("-inf")) or int(value) != value:
        raise InvalidRequest(f"{key} is {value!r}; it must be a whole number")
    return int(value)


def text(obj: Mapping[str, Any], key: str, default: str | None = None) -> Any:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise InvalidRequest(f"{key} is {value!r}; it must be a string")
    return value


def flag(obj: Mapping[str, Any], key: str, default: bool | None = None) -> Any:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidRequest(f"{key} is {value!r}; it must be true or false")
    return value


def mapping(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidRequest(f"{key} must be a JSON object")
    return value


def array(obj: Mapping[str, Any], key: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidRequest(f"{key} must be a JSON array")
    return value
