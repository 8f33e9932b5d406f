"""Message bodies: the content types ``json`` / ``text`` / ``bytes`` and their encodings.

A body is stored as the bytes Cloudflare would store: JSON as compact UTF-8 JSON, text as UTF-8, bytes
as given. ``v8`` (a JavaScript structured clone) is refused: Python has no safe equivalent, and
Conveyor never falls back to pickle.

JSON is encoded by orjson (an order of magnitude faster than the standard library on 1 KB bodies,
which is most of a batch send's client-side cost), held to the standard library's rules: whatever
orjson would treat differently goes to ``json`` instead — integers past 64 bits (which ``json`` keeps
exact), dataclasses, datetimes and subclasses (which ``json`` refuses), and any output with a
``null`` in it, because orjson writes NaN and infinities as ``null`` where they must be refused.
Decoding uses orjson too (six times faster). orjson turns an integer past 64 bits into a float, where
``json`` keeps it exact: when the value holds a float of magnitude 2**63 or more (which any such
integer becomes), or orjson refuses the text (lone surrogates, numbers past a float's range), ``json``
decodes it again, so the value is always the one ``json.loads`` gives.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import orjson

from conveyor.errors import InvalidMessage

ContentType = Literal["json", "text", "bytes"]
CONTENT_TYPES: tuple[ContentType, ...] = ("json", "text", "bytes")

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_ORJSON_OPTIONS = (
    orjson.OPT_NON_STR_KEYS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


# The smallest magnitude of a float orjson makes from an integer token (one past 64 bits).
_BIG = float(2**63)


def encode_json(body: Any) -> bytes:
    """Compact UTF-8 JSON of the value ``json`` with ``allow_nan=False`` would write, refusing what it
    refuses (a float may be spelled differently: orjson writes 1e-05 as 0.00001)."""
    try:
        data = orjson.dumps(body, option=_ORJSON_OPTIONS)
    except TypeError:  # JSONEncodeError: a type or an integer orjson leaves to json
        return _dumps(body).encode()
    # rfind: CPython's backward search for a short needle runs about twice as fast as ``in``.
    if data.rfind(b"null") >= 0:
        return _dumps(body).encode()
    return data


def stored_type(kind: str, traceparent: str | None) -> str:
    """What an engine writes in a message's content-type column: the type, and the sender's
    traceparent as a parameter (``json;traceparent=00-...``), so no shard needs a column for it."""
    return kind if traceparent is None else f"{kind};traceparent={traceparent}"


def split_stored_type(stored: str) -> tuple[Any, str | None]:
    """The content type and the traceparent of a stored content-type column (:func:`stored_type`)."""
    if ";" not in stored:
        return stored, None
    kind, _, parameter = stored.partition(";")
    name, _, value = parameter.partition("=")
    return kind, value if name == "traceparent" and value else None


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
            return encode_json(body), kind
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
        return decode_json(data)
    if content_type == "text":
        return data.decode()
    return data


def decode_json(data: bytes) -> Any:
    """The value ``json.loads(data)`` gives, found faster."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)
    return json.loads(data) if _has_big_float(value) else value


def _has_big_float(value: Any) -> bool:
    """Whether ``value`` holds a float of magnitude 2**63 or more (it may have been an integer)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is float and (item >= _BIG or item <= -_BIG):
            return True
    return False
