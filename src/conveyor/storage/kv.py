"""KV namespaces: the :class:`KVStore` interface every backend implements, its records and its limits.

A store holds the KV namespaces of one deployment, for every account: each call names the account
(the server's and the raw engine's view); the client facade (:mod:`conveyor.storage.kv_handle`)
passes its own. Backends: SQLite (``kv.db`` in the deployment directory, ``kv_sqlite.py``),
PostgreSQL (tables of migration 0009, ``kv_postgres.py``) and a server (``kv_http.py``, over
Cloudflare's ``/storage/kv/namespaces`` routes). :func:`open_kv_store` picks one for a deployment.

The contract, held by every backend (``tests/storage/test_kv*.py``):

- A namespace has an id of 32 lowercase hex characters and a title unique in its account (1 to 512
  bytes). Another account's namespace is not found, whatever its id.
- A key is 1 to 512 bytes of UTF-8, neither ``.`` nor ``..``; a value at most 25 MiB; metadata any
  JSON value whose compact encoding is at most 1024 bytes. Keys list in byte order.
- ``expiration`` (seconds since the epoch) must be at least 60 s ahead, ``expiration_ttl`` at least
  60; when both are given the TTL wins (as Cloudflare's). An expired key is invisible at once, by
  the store's clock; :meth:`KVStore.purge_expired` (a coordinator service) removes the rows later.
- Every write is durable before it returns; a bulk write or delete is all or nothing.
- Every refusal is a :class:`~conveyor.errors.ConveyorError` naming the limit and the value given,
  and changes nothing.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Literal

from conveyor.codec import decode_json, encode_json
from conveyor.deployment import Deployment
from conveyor.engine.base import Clock
from conveyor.errors import InvalidRequest
from conveyor.limits import ID_PATTERN
from conveyor.storage.kv_errors import (
    InvalidKVExpiration,
    InvalidKVKey,
    InvalidKVNamespaceTitle,
    KVMetadataTooLarge,
    KVNamespaceNotFound,
    KVValueTooLarge,
)

# Cloudflare's Workers KV limits.
MAX_KEY_BYTES = 512
MAX_VALUE_BYTES = 25 * 1024 * 1024
MAX_METADATA_BYTES = 1024
MIN_EXPIRATION_TTL = 60
MAX_TITLE_BYTES = 512
MIN_LIST_LIMIT = 10
MAX_LIST_LIMIT = 1000
MAX_BULK_WRITE = 10_000
MAX_BULK_GET = 100

# How a value was given, so it comes back as it went in: ``text`` (a str, stored as UTF-8),
# ``bytes`` (as given; also every value written over REST without Conveyor's type header) and
# ``json`` (anything else JSON can hold, stored as compact UTF-8 JSON).
Kind = Literal["text", "bytes", "json"]
KINDS: tuple[Kind, ...] = ("text", "bytes", "json")


@dataclasses.dataclass(frozen=True)
class KVNamespaceInfo:
    id: str
    title: str
    supports_url_encoding: bool = True


@dataclasses.dataclass(frozen=True)
class KVKey:
    """A listed key: its ``expiration`` (seconds since the epoch) and ``metadata`` when it has them."""

    name: str
    expiration: int | None = None
    metadata: Any = None


@dataclasses.dataclass(frozen=True)
class KVKeyPage:
    """One page of :meth:`KVStore.list`: ``cursor`` continues it, ``""`` once ``list_complete``."""

    keys: list[KVKey]
    list_complete: bool
    cursor: str = ""


@dataclasses.dataclass(frozen=True)
class KVValue:
    """A stored value: its bytes, how it was given (``kind``), its metadata and expiration."""

    data: bytes
    kind: Kind = "bytes"
    metadata: Any = None
    expiration: int | None = None

    def decoded(self, as_type: Kind | None = None) -> Any:
        """The Python value: as it was given, or read as ``text``, ``bytes`` or ``json``."""
        kind = as_type or self.kind
        if kind == "bytes":
            return self.data
        if kind == "text":
            return self.data.decode("utf-8", errors="replace")
        try:
            return decode_json(self.data)
        except ValueError:
            raise InvalidRequest("the stored value is not JSON; read it with type='text' or 'bytes'") from None


@dataclasses.dataclass(frozen=True)
class KVWrite:
    """One checked write (see :func:`check_write`): ``metadata`` is its JSON text or ``None``."""

    key: str
    data: bytes
    kind: Kind = "bytes"
    metadata: str | None = None
    expiration: int | None = None
    expiration_ttl: int | None = None

    def expires_at(self, now_ms: int) -> int | None:
        """The absolute expiration, seconds since the epoch: the TTL counts from ``now_ms``."""
        if self.expiration_ttl is not None:
            return now_ms // 1000 + self.expiration_ttl
        return self.expiration


# -- checks ------------------------------------------------------------------------------------------
def check_key(key: object) -> str:
    if not isinstance(key, str):
        raise InvalidKVKey(f"a KV key must be a string, not {type(key).__name__}")
    size = len(key.encode("utf-8", errors="surrogatepass"))
    if size == 0:
        raise InvalidKVKey("a KV key must not be empty")
    if size > MAX_KEY_BYTES:
        raise InvalidKVKey(f"KV key of {size} bytes exceeds the limit of {MAX_KEY_BYTES} bytes (UTF-8)")
    if key in (".", ".."):
        raise InvalidKVKey(f"KV key {key!r} is not allowed")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidKVKey("a KV key must be valid Unicode (it holds a lone surrogate)") from None
    return key


def check_title(title: object) -> str:
    if not isinstance(title, str) or not title.strip():
        raise InvalidKVNamespaceTitle(f"a KV namespace title must be a non-empty string, not {title!r}")
    size = len(title.encode("utf-8", errors="surrogatepass"))
    if size > MAX_TITLE_BYTES:
        raise InvalidKVNamespaceTitle(f"KV namespace title of {size} bytes exceeds the limit of {MAX_TITLE_BYTES}")
    return title


def check_namespace_id(namespace_id: object) -> str:
    if not isinstance(namespace_id, str) or not ID_PATTERN.match(namespace_id):
        raise KVNamespaceNotFound(
            f"KV namespace id {namespace_id!r} is malformed: expected 32 lowercase hex characters"
        )
    return namespace_id


def encode_value(value: Any) -> tuple[bytes, Kind]:
    """A value's stored bytes and kind: str as UTF-8 ``text``, bytes-like as ``bytes``, else ``json``."""
    if isinstance(value, str):
        try:
            return value.encode("utf-8"), "text"
        except UnicodeEncodeError:
            raise InvalidRequest("a KV text value must be valid Unicode (it holds a lone surrogate)") from None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value), "bytes"
    try:
        return encode_json(value), "json"
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(f"a KV value must be str, bytes or JSON-encodable: {exc}") from None


def encode_metadata(metadata: Any) -> str | None:
    if metadata is None:
        return None
    try:
        text = encode_json(metadata)
    except (TypeError, ValueError) as exc:
        raise KVMetadataTooLarge(f"KV metadata must be JSON-encodable: {exc}") from None
    if len(text) > MAX_METADATA_BYTES:
        raise KVMetadataTooLarge(
            f"KV metadata of {len(text)} bytes (serialized JSON) exceeds the limit of {MAX_METADATA_BYTES} bytes"
        )
    return text.decode()


def _whole_seconds(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or int(value) != value:
        raise InvalidKVExpiration(f"invalid {name} {value!r}: expected a whole number of seconds")
    return int(value)


def check_write(
    key: object,
    data: bytes,
    kind: Kind,
    *,
    metadata: Any = None,
    expiration: object = None,
    expiration_ttl: object = None,
    now_ms: int,
) -> KVWrite:
    """One write checked against every limit (``now_ms``: the clock, for ``expiration``)."""
    checked_key = check_key(key)
    if len(data) > MAX_VALUE_BYTES:
        raise KVValueTooLarge(f"KV value of {len(data)} bytes exceeds the limit of {MAX_VALUE_BYTES} bytes (25 MiB)")
    if kind not in KINDS:
        raise InvalidRequest(f"KV value type {kind!r} is not one of {', '.join(KINDS)}")
    meta = encode_metadata(metadata)
    ttl = None
    at = None
    if expiration_ttl is not None:
        ttl = _whole_seconds("expiration_ttl", expiration_ttl)
        if ttl < MIN_EXPIRATION_TTL:
            raise InvalidKVExpiration(
                f"invalid expiration_ttl of {ttl}: it must be at least {MIN_EXPIRATION_TTL} seconds"
            )
    elif expiration is not None:
        at = _whole_seconds("expiration", expiration)
        earliest = now_ms // 1000 + MIN_EXPIRATION_TTL
        if at < earliest:
            raise InvalidKVExpiration(
                f"invalid expiration of {at}: it must be at least {MIN_EXPIRATION_TTL} seconds in the future "
                f"(at least {earliest} seconds since the epoch)"
            )
    return KVWrite(checked_key, data, kind, meta, at, ttl)


def check_list_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not MIN_LIST_LIMIT <= limit <= MAX_LIST_LIMIT:
        raise InvalidRequest(f"invalid list limit {limit!r}: it must be from {MIN_LIST_LIMIT} to {MAX_LIST_LIMIT}")
    return limit


def check_count(what: str, count: int, limit: int) -> None:
    if count > limit:
        raise InvalidRequest(f"{what} of {count} keys exceeds the limit of {limit}")


def encode_cursor(last_key: str) -> str:
    return base64.urlsafe_b64encode(last_key.encode()).decode().rstrip("=")


def decode_cursor(cursor: object) -> str:
    """The key a cursor continues after (``""``: from the start)."""
    if cursor in (None, ""):
        return ""
    if not isinstance(cursor, str):
        raise InvalidRequest(f"invalid KV list cursor {cursor!r}")
    try:
        return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidRequest(f"invalid KV list cursor {cursor!r}: pass one a list returned") from None


def metadata_of(text: str | None) -> Any:
    return None if text is None else decode_json(text.encode())


def new_namespace_id() -> str:
    return uuid.uuid4().hex


# -- the interface ----------------------------------------------------------------------------------
class KVStore(ABC):
    """The KV namespaces of one deployment, every account's; see the module docstring's contract.

    >>> store = open_kv_store(Deployment("sqlite", "/var/lib/conveyor"), SystemClock())
    >>> ns = store.create_namespace("local", "cdn-meta")
    >>> store.put("local", ns.id, KVWrite("jquery", b'{"v":"3.7.1"}', "json"))
    >>> store.get("local", ns.id, "jquery").decoded()
    {'v': '3.7.1'}
    """

    clock: Clock

    # -- namespaces --------------------------------------------------------------------------
    @abstractmethod
    def create_namespace(self, account: str, title: str) -> KVNamespaceInfo:
        """A new namespace; ``KVNamespaceExists`` (10014) if the account has one of that title."""

    @abstractmethod
    def list_namespaces(self, account: str) -> list[KVNamespaceInfo]:
        """The account's namespaces, by title."""

    @abstractmethod
    def get_namespace(self, account: str, namespace_id: str) -> KVNamespaceInfo:
        """The namespace; ``KVNamespaceNotFound`` (10013) if the account has none of that id."""

    @abstractmethod
    def find_namespace(self, account: str, title: str) -> KVNamespaceInfo:
        """The account's namespace of that title; ``KVNamespaceNotFound`` if none."""

    @abstractmethod
    def rename_namespace(self, account: str, namespace_id: str, title: str) -> KVNamespaceInfo:
        """Give the namespace a new title (``KVNamespaceExists`` if another has it)."""

    @abstractmethod
    def delete_namespace(self, account: str, namespace_id: str) -> None:
        """Delete the namespace and every key in it."""

    # -- keys --------------------------------------------------------------------------------
    def put(self, account: str, namespace_id: str, write: KVWrite) -> None:
        """Store one checked write (:func:`check_write`), replacing the key's value, metadata and
        expiration."""
        self.put_many(account, namespace_id, [write])

    @abstractmethod
    def put_many(self, account: str, namespace_id: str, writes: Sequence[KVWrite]) -> None:
        """Store up to 10,000 writes at once: all of them or none."""

    def get(self, account: str, namespace_id: str, key: str) -> KVValue | None:
        """The key's value, or ``None`` if it is missing or expired."""
        return self.get_many(account, namespace_id, [key])[key]

    @abstractmethod
    def get_many(self, account: str, namespace_id: str, keys: Sequence[str]) -> dict[str, KVValue | None]:
        """Up to 100 keys' values (``None`` for each missing or expired one)."""

    def delete(self, account: str, namespace_id: str, key: str) -> None:
        """Remove the key (a missing key is no error, as Cloudflare's)."""
        self.delete_many(account, namespace_id, [key])

    @abstractmethod
    def delete_many(self, account: str, namespace_id: str, keys: Sequence[str]) -> None:
        """Remove up to 10,000 keys at once."""

    @abstractmethod
    def list(
        self, account: str, namespace_id: str, *, prefix: str = "", cursor: str = "", limit: int = 1000
    ) -> KVKeyPage:
        """Up to ``limit`` (10..1000) live keys starting with ``prefix``, in byte order, after the
        key ``cursor`` points past."""

    @abstractmethod
    def purge_expired(self) -> int:
        """Delete the rows of expired keys, every account's; returns how many (a coordinator service)."""

    @abstractmethod
    def close(self) -> None: ...


def open_kv_store(deployment: Deployment, clock: Clock) -> KVStore:
    """The store of ``deployment``: its SQLite directory's ``kv.db``, its PostgreSQL tables, or its server."""
    if deployment.kind == "sqlite":
        from conveyor.storage.kv_sqlite import SQLiteKVStore

        return SQLiteKVStore(deployment.location, clock)
    if deployment.kind == "postgresql":
        from conveyor.storage.kv_postgres import PostgresKVStore

        return PostgresKVStore(deployment.location, clock)
    from conveyor.storage.kv_http import HTTPKVStore

    return HTTPKVStore(deployment, clock)
