"""Message bodies: the content types ``json`` / ``text`` / ``bytes`` and their encodings.

A body is stored as the bytes Cloudflare would store: JSON as compact UTF-8 JSON, text as UTF-8, bytes
as given. ``v8`` (a JavaScript structured clone) is refused: Python has no safe equivalent, and
Conveyor never falls back to pickle.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from conveyor.errors import InvalidMessage

ContentType = Literal["json", "text", "bytes"]
CONTENT_TYPES: tuple[ContentType, ...] = ("json", "text", "bytes")

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def check_content_type(content_type: object) -> ContentType:
    """Return ``content_type`` if Conveyor stores it, else raise :class:`InvalidMessage`."""
    if content_type in CONTENT_TYPES:
        return content_type
    if content_type == "v8":
        raise InvalidMessage(
            "content type 'v8' (a JavaScript structured clone) is not supported in Python; "
            "use 'json', 'text' or 'bytes'"
        )
    raise InvalidMessage(f"unknown content type {content_type!r}; expected one of json, text, bytes")


def encode(body: Any, content_type: object = "json") -> tuple[bytes, ContentType]:
    """Encode ``body`` for storage; raise :class:`InvalidMessage` on a body the type cannot hold."""
    kind = check_content_type(content_type)
    if kind == "json":
        try:
            return _dumps(body).encode(), kind
        except (TypeError, ValueError) as exc:
            raise InvalidMessage(f"body is not JSON-serialisable: {exc}") from None
    if kind == "text":
        if not isinstance(body, str):
            raise InvalidMessage(f"content type 'text' needs a str body, got {type(body).__name__}")
        return body.encode(), kind
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body), kind
    raise InvalidMessage(f"content type 'bytes' needs a bytes-like body, got {type(body).__name__}")


def decode(data: bytes, content_type: str) -> Any:
    """The Python value of a stored body."""
    if content_type == "json":
        return json.loads(data)
    if content_type == "text":
        return data.decode()
    return data
