"""Workers KV's REST shapes (``/storage/kv/namespaces/...``), as the ``cloudflare`` SDK's
``kv.namespaces.*`` sends and reads them, and how each maps to :mod:`conveyor.storage.kv`."""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from conveyor.storage import kv as model
from conveyor.wire.decoding import Shape
from conveyor.wire.envelope import Error


class KVNamespace(Shape):
    id: str
    title: str
    supports_url_encoding: bool = True


def namespace(info: model.KVNamespaceInfo) -> KVNamespace:
    return KVNamespace(info.id, info.title, info.supports_url_encoding)


class KVNamespaceRequest(Shape):
    """The body of a namespace's create (POST) and rename (PUT)."""

    title: str


class KVKey(Shape, omit_defaults=True):
    """A listed key; ``expiration`` and ``metadata`` are left out when the key has none."""

    name: str
    expiration: int | UnsetType = UNSET
    metadata: Any = UNSET

    def to_model(self) -> model.KVKey:
        return model.KVKey(
            self.name,
            None if self.expiration is UNSET else self.expiration,
            None if self.metadata is UNSET else self.metadata,
        )


def key(k: model.KVKey) -> KVKey:
    return KVKey(
        k.name,
        UNSET if k.expiration is None else k.expiration,
        UNSET if k.metadata is None else k.metadata,
    )


class KVCursorInfo(Shape):
    """A keys list's ``result_info``: ``cursor`` is ``""`` on the last page."""

    count: int
    cursor: str


class KVKeysEnvelope(Shape, kw_only=True):
    """The answer of a keys list: the envelope with a cursor instead of page numbers."""

    success: bool = True
    errors: list[Error] = []
    messages: list[Error] = []
    result: list[KVKey]
    result_info: KVCursorInfo


class KVBulkWrite(Shape, kw_only=True):
    """One pair of a bulk write: ``value`` is text, or base64 of bytes when ``base64`` is true."""

    key: str
    value: str
    base64: bool = False
    expiration: int | float | None = None
    expiration_ttl: int | float | None = None
    metadata: Any = None
    # Conveyor's own: how the value was given (``text``, ``bytes``, ``json``), so it reads back so.
    conveyor_kind: Literal["text", "bytes", "json"] | None = None


class KVBulkResult(Shape):
    successful_key_count: int
    unsuccessful_keys: list[str] = []


class KVBulkGetRequest(Shape, kw_only=True):
    keys: list[str] = []
    type: Literal["text", "json"] = "text"
    with_metadata: bool = msgspec.field(default=False, name="withMetadata")


class KVValueWithMetadata(Shape, omit_defaults=True):
    value: Any
    metadata: Any
    expiration: int | UnsetType = UNSET


class KVBulkGetResult(Shape):
    """``values``: each key's value (``None`` when missing), or its :class:`KVValueWithMetadata`."""

    values: dict[str, Any]
