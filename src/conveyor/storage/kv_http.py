"""KV namespaces behind ``conveyor serve``: :class:`HTTPKVStore` speaks Cloudflare's
``/storage/kv/namespaces`` routes (``conveyor.server.kv_routes``), so ``connect("http://...")``
gives ``cv.kv(...)`` the same API as the embedded engines.

Conveyor's own headers carry what Cloudflare's routes leave out: ``conveyor-kv-type`` (how a value
was given, both ways) and ``conveyor-kv-metadata`` (a value's metadata on its read, so a read is one
round trip); a bulk write's pairs carry ``conveyor_kind``. Expired keys are purged by the server.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any, TypeVar, cast
from urllib.parse import quote

import httpx

from conveyor import errors, wire
from conveyor.client.http import error_from
from conveyor.deployment import Deployment
from conveyor.engine.base import Clock
from conveyor.errors import ConveyorError
from conveyor.storage import kv_errors
from conveyor.storage.kv import (
    KINDS,
    MAX_BULK_GET,
    Kind,
    KVKeyPage,
    KVNamespaceInfo,
    KVStore,
    KVValue,
    KVWrite,
    check_count,
    check_key,
    check_namespace_id,
    check_title,
    metadata_of,
)
from conveyor.storage.kv_errors import KVNamespaceNotFound
from conveyor.wire import kv as shapes

T = TypeVar("T")
KIND_HEADER = "conveyor-kv-type"
METADATA_HEADER = "conveyor-kv-metadata"
NAMESPACES_PER_PAGE = 1000


_BY_STATUS: dict[int, type[ConveyorError]] = {401: errors.Unauthorized, 403: errors.Forbidden, 404: KVNamespaceNotFound}


def _error(response: httpx.Response) -> ConveyorError:
    """The error the server raised: the class it names (KV's or Conveyor's), else by status."""
    return error_from(response, kv_errors, by_status=_BY_STATUS)


class HTTPKVStore(KVStore):
    def __init__(self, deployment: Deployment, clock: Clock, timeout: float = 60.0) -> None:
        self.clock = clock
        headers = {"authorization": f"Bearer {deployment.token}"} if deployment.token else {}
        self._http = httpx.Client(base_url=deployment.location.rstrip("/"), headers=headers, timeout=timeout)

    # -- plumbing ----------------------------------------------------------------------------
    @staticmethod
    def _path(account: str, namespace_id: str = "", *rest: str) -> str:
        path = f"/client/v4/accounts/{quote(account, safe='')}/storage/kv/namespaces"
        if namespace_id:
            path += "/" + check_namespace_id(namespace_id)
        return "/".join([path, *rest])

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ConveyorError(f"cannot reach the Conveyor server: {exc}") from exc
        if response.status_code >= 400:
            raise _error(response)
        return response

    def _result(self, kind: type[T], method: str, path: str, body: Any = None, **kwargs: Any) -> T:
        if body is not None:
            kwargs["content"] = wire.encode(body)
            kwargs["headers"] = {"content-type": "application/json"}
        content = self._send(method, path, **kwargs).content
        return wire.decode_answer(content, wire.Envelope[kind]).result  # type: ignore[valid-type]

    # -- namespaces --------------------------------------------------------------------------
    def create_namespace(self, account: str, title: str) -> KVNamespaceInfo:
        body = shapes.KVNamespaceRequest(check_title(title))
        return _info(self._result(shapes.KVNamespace, "POST", self._path(account), body))

    def list_namespaces(self, account: str) -> list[KVNamespaceInfo]:
        found: list[KVNamespaceInfo] = []
        page = 1
        while True:
            params = {"page": page, "per_page": NAMESPACES_PER_PAGE, "order": "title"}
            chunk = self._result(list[shapes.KVNamespace], "GET", self._path(account), params=params)
            found.extend(_info(n) for n in chunk)
            if len(chunk) < NAMESPACES_PER_PAGE:
                return found
            page += 1

    def get_namespace(self, account: str, namespace_id: str) -> KVNamespaceInfo:
        return _info(self._result(shapes.KVNamespace, "GET", self._path(account, namespace_id)))

    def find_namespace(self, account: str, title: str) -> KVNamespaceInfo:
        check_title(title)
        for info in self.list_namespaces(account):
            if info.title == title:
                return info
        raise KVNamespaceNotFound(f"there is no KV namespace titled {title!r}")

    def rename_namespace(self, account: str, namespace_id: str, title: str) -> KVNamespaceInfo:
        body = shapes.KVNamespaceRequest(check_title(title))
        return _info(self._result(shapes.KVNamespace, "PUT", self._path(account, namespace_id), body))

    def delete_namespace(self, account: str, namespace_id: str) -> None:
        self._send("DELETE", self._path(account, namespace_id))

    # -- keys --------------------------------------------------------------------------------
    def _value_path(self, account: str, namespace_id: str, key: str) -> str:
        return self._path(account, namespace_id, "values", quote(check_key(key), safe=""))

    def put(self, account: str, namespace_id: str, write: KVWrite) -> None:
        params: dict[str, int] = {}
        if write.expiration_ttl is not None:
            params["expiration_ttl"] = write.expiration_ttl
        elif write.expiration is not None:
            params["expiration"] = write.expiration
        files: dict[str, Any] = {"value": ("value", write.data, "application/octet-stream")}
        if write.metadata is not None:
            files["metadata"] = (None, write.metadata.encode(), "application/json")
        self._send(
            "PUT",
            self._value_path(account, namespace_id, write.key),
            files=files,
            params=params,
            headers={KIND_HEADER: write.kind},
        )

    def put_many(self, account: str, namespace_id: str, writes: Sequence[KVWrite]) -> None:
        pairs = [
            shapes.KVBulkWrite(
                key=w.key,
                value=base64.b64encode(w.data).decode(),
                base64=True,
                expiration=w.expiration,
                expiration_ttl=w.expiration_ttl,
                metadata=None if w.metadata is None else json.loads(w.metadata),
                conveyor_kind=w.kind,
            )
            for w in writes
        ]
        self._result(shapes.KVBulkResult, "PUT", self._path(account, namespace_id, "bulk"), pairs)

    def get(self, account: str, namespace_id: str, key: str) -> KVValue | None:
        path = self._value_path(account, namespace_id, key)
        try:
            response = self._send("GET", path)
        except kv_errors.KVKeyNotFound:
            return None
        kind = response.headers.get(KIND_HEADER, "bytes")
        metadata = response.headers.get(METADATA_HEADER)
        expiration = response.headers.get("expiration")
        return KVValue(
            response.content,
            cast(Kind, kind if kind in KINDS else "bytes"),
            None if metadata is None else metadata_of(base64.urlsafe_b64decode(metadata).decode()),
            int(expiration) if expiration and expiration.isdigit() else None,
        )

    def get_many(self, account: str, namespace_id: str, keys: Sequence[str]) -> dict[str, KVValue | None]:
        check_count("a bulk get", len(keys), MAX_BULK_GET)
        self.get_namespace(account, namespace_id)
        return {key: self.get(account, namespace_id, key) for key in keys}

    def delete(self, account: str, namespace_id: str, key: str) -> None:
        self._send("DELETE", self._value_path(account, namespace_id, key))

    def delete_many(self, account: str, namespace_id: str, keys: Sequence[str]) -> None:
        path = self._path(account, namespace_id, "bulk", "delete")
        self._result(shapes.KVBulkResult, "POST", path, [check_key(k) for k in keys])

    def list(
        self, account: str, namespace_id: str, *, prefix: str = "", cursor: str = "", limit: int = 1000
    ) -> KVKeyPage:
        params: dict[str, Any] = {"limit": limit}
        if prefix:
            params["prefix"] = prefix
        if cursor:
            params["cursor"] = cursor
        content = self._send("GET", self._path(account, namespace_id, "keys"), params=params).content
        answer = wire.decode_answer(content, shapes.KVKeysEnvelope)
        next_cursor = answer.result_info.cursor
        return KVKeyPage([k.to_model() for k in answer.result], not next_cursor, next_cursor)

    def purge_expired(self) -> int:
        return 0  # the server's coordinator purges

    def close(self) -> None:
        self._http.close()


def _info(n: shapes.KVNamespace) -> KVNamespaceInfo:
    return KVNamespaceInfo(n.id, n.title, n.supports_url_encoding)
