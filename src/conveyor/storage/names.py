"""Checks of bucket names, object keys, custom metadata and rules, before anything is written."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from conveyor.storage.errors import InvalidBucketName, InvalidObjectKey, InvalidObjectMetadata

# R2's rules: 3 to 63 characters of lower-case letters, digits and hyphens, beginning and ending
# with a letter or a digit.
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
MAX_KEY_BYTES = 1024
# R2's limit on custom metadata: 8,192 bytes of keys and values together.
MAX_METADATA_BYTES = 8192
MAX_CONTENT_TYPE_BYTES = 256
MAX_SEGMENT_BYTES = 255


def check_bucket_name(name: Any) -> str:
    if not isinstance(name, str) or not BUCKET_NAME.match(name):
        raise InvalidBucketName(
            f"bucket name {name!r} is invalid: 3 to 63 characters of lower-case letters, digits and "
            "hyphens, beginning and ending with a letter or digit"
        )
    return name


def check_key(key: Any) -> str:
    """A key of at most 1,024 bytes of UTF-8, with no NUL; and, since the same key must name the
    same bytes in a directory and in any S3-compatible service, no empty, ``.`` or ``..`` segment
    and no leading or trailing ``/``."""
    if not isinstance(key, str):
        raise InvalidObjectKey(f"object key must be a string, not {type(key).__name__}")
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidObjectKey(f"object key {key[:80]!r} is not valid UTF-8") from None
    if size == 0:
        raise InvalidObjectKey("object key is empty")
    if size > MAX_KEY_BYTES:
        raise InvalidObjectKey(f"object key is {size} bytes of UTF-8; the limit is {MAX_KEY_BYTES}")
    if "\x00" in key:
        raise InvalidObjectKey(f"object key {key[:80]!r} contains a NUL character")
    if key.startswith("/") or key.endswith("/"):
        raise InvalidObjectKey(f"object key {key[:80]!r} begins or ends with '/'")
    for segment in key.split("/"):
        if segment in ("", ".", ".."):
            raise InvalidObjectKey(f"object key {key[:80]!r} has an empty, '.' or '..' path segment")
    return key


def check_local_key(key: str) -> str:
    """A key a directory can hold: each ``/``-separated segment is a file or directory name, at most
    255 bytes on the file systems Conveyor runs on."""
    for segment in key.split("/"):
        if len(segment.encode()) > MAX_SEGMENT_BYTES:
            raise InvalidObjectKey(
                f"object key {shown(key)}: a local bucket's key segments (between '/') are at most "
                f"{MAX_SEGMENT_BYTES} bytes, the file system's limit; one is {len(segment.encode())}"
            )
    return key


def shown(key: str) -> str:
    """``key`` for a message: its first 80 characters."""
    return repr(key) if len(key) <= 80 else repr(key[:80]) + f"... ({len(key)} characters)"


def check_prefix(prefix: Any, what: str = "prefix") -> str:
    if not isinstance(prefix, str) or "\x00" in prefix or len(prefix.encode("utf-8", "replace")) > MAX_KEY_BYTES:
        raise InvalidObjectKey(f"{what} {prefix!r} must be a string of at most {MAX_KEY_BYTES} bytes with no NUL")
    return prefix


def check_metadata(metadata: Any) -> dict[str, str]:
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidObjectMetadata(f"custom metadata must be a mapping of strings, not {type(metadata).__name__}")
    total = 0
    for name, value in metadata.items():
        if not isinstance(name, str) or not isinstance(value, str) or not name:
            raise InvalidObjectMetadata(f"custom metadata {name!r}: names and values must be strings (names not empty)")
        total += len(name.encode()) + len(value.encode())
    if total > MAX_METADATA_BYTES:
        raise InvalidObjectMetadata(f"custom metadata is {total} bytes; the limit is {MAX_METADATA_BYTES}")
    return dict(metadata)


def check_content_type(content_type: Any) -> str:
    if content_type is None:
        return "application/octet-stream"
    if (
        not isinstance(content_type, str)
        or not content_type
        or len(content_type) > MAX_CONTENT_TYPE_BYTES
        or any(ord(c) < 32 or ord(c) > 126 for c in content_type)
    ):
        raise InvalidObjectMetadata(
            f"content type {content_type!r} must be printable ASCII of 1 to {MAX_CONTENT_TYPE_BYTES} characters"
        )
    return content_type
