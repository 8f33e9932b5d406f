"""Buckets through ``conveyor serve``, for ``connect("http://...")``: the same methods as
:class:`~conveyor.storage.service.StorageService`, over the server's object routes
(:mod:`conveyor.server.object_routes`). The server does the work (and its checks, durability and
notifications); this client only carries requests and answers."""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterator
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from conveyor import egress, tracing
from conveyor import wire as wire_module
from conveyor.client.http import error_from
from conveyor.deployment import Deployment
from conveyor.egress import EgressPolicy
from conveyor.errors import ConveyorError
from conveyor.storage import errors as storage_errors
from conveyor.storage.model import Action, BucketInfo, LifecycleRule, NotificationRule, ObjectInfo
from conveyor.storage.service import Data, _Hashing
from conveyor.wire import r2

T = TypeVar("T")
TIMEOUT = httpx.Timeout(300.0, connect=10.0)


def _error(response: httpx.Response) -> ConveyorError:
    return error_from(response, storage_errors, egress)


class _RemoteBody:
    """An object's bytes as the server streams them: the ``bytes()`` and ``stream()`` that
    :class:`~conveyor.storage.bucket.ObjectBody` reads (obstore's result has the same two)."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    def bytes(self) -> builtins.bytes:
        try:
            return self._response.read()
        finally:
            self._response.close()

    def stream(self, min_chunk_size: int = 65536) -> Iterator[builtins.bytes]:
        try:
            yield from self._response.iter_bytes(min_chunk_size)
        finally:
            self._response.close()


class RemoteStorage:
    def __init__(self, deployment: Deployment) -> None:
        headers = {"authorization": f"Bearer {deployment.token}"} if deployment.token else {}
        self._http = httpx.Client(base_url=deployment.location.rstrip("/"), headers=headers, timeout=TIMEOUT)

    def close(self) -> None:
        self._http.close()

    # -- requests -----------------------------------------------------------------------------
    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        traceparent = tracing.current_traceparent()
        if traceparent is not None:  # the server's notifications of this write carry its trace
            kwargs["headers"] = {**kwargs.get("headers", {}), "traceparent": traceparent}
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ConveyorError(f"cannot reach the Conveyor server: {exc}") from exc
        if response.status_code >= 400:
            raise _error(response)
        return response

    def _result(self, kind: type[T], method: str, path: str, **kwargs: Any) -> T:
        response = self._send(method, path, **kwargs)
        return wire_module.decode_answer(response.content, wire_module.Envelope[kind]).result  # type: ignore[valid-type]

    @staticmethod
    def _buckets(account: str) -> str:
        return f"/conveyor/v1/accounts/{quote(account, safe='')}/buckets"

    def _bucket_path(self, account: str, bucket: str) -> str:
        return f"{self._buckets(account)}/{quote(bucket, safe='')}"

    def _object_path(self, account: str, bucket: str, what: str, key: str) -> str:
        return f"{self._bucket_path(account, bucket)}/{what}/{quote(key, safe='/')}"

    # -- buckets ------------------------------------------------------------------------------
    def create_bucket(
        self,
        account: str,
        name: str,
        *,
        url: str | None = None,
        endpoint: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        egress: EgressPolicy | None = None,
    ) -> BucketInfo:
        body = r2.BucketLocationRequest(
            name=name,
            url=url,
            endpoint=endpoint,
            region=region,
            access_key_id=access_key_id,
            secret_access_key=secret_access_key,
        )
        shape = self._result(r2.BucketLocation, "POST", self._buckets(account), content=wire_module.encode(body))
        return shape.to_model()

    def bucket(self, account: str, name: str) -> BucketInfo:
        return self._result(r2.BucketLocation, "GET", self._bucket_path(account, name)).to_model()

    def list_buckets(self, account: str) -> list[BucketInfo]:
        return [b.to_model() for b in self._result(list[r2.BucketLocation], "GET", self._buckets(account))]

    def delete_bucket(self, account: str, name: str) -> None:
        self._send("DELETE", self._bucket_path(account, name))

    # -- objects ------------------------------------------------------------------------------
    def put(
        self,
        account: str,
        bucket: str,
        key: str,
        data: Data,
        *,
        content_type: str,
        metadata: dict[str, str],
        only_if_absent: bool,
    ) -> ObjectInfo:
        body = _Hashing(data)
        headers = {
            "content-type": content_type,
            "conveyor-metadata": json.dumps(metadata, ensure_ascii=True),
            "conveyor-only-if-absent": "1" if only_if_absent else "0",
        }
        path = self._object_path(account, bucket, "objects", key)
        return self._result(r2.Object, "PUT", path, content=body.chunks(b""), headers=headers).to_model()

    def head(self, account: str, bucket: str, key: str) -> ObjectInfo:
        return self._result(r2.Object, "GET", self._object_path(account, bucket, "info", key)).to_model()

    def exists(self, account: str, bucket: str, key: str) -> bool:
        try:
            self.head(account, bucket, key)
        except storage_errors.ObjectNotFound:
            return False
        return True

    def get(self, account: str, bucket: str, key: str, byte_range: tuple[int, int] | None) -> tuple[ObjectInfo, Any]:
        headers = {}
        if byte_range is not None:
            start, end = byte_range
            if end <= start:
                return self.head(account, bucket, key), None
            headers["range"] = f"bytes={start}-{end - 1}"
        request = self._http.build_request("GET", self._object_path(account, bucket, "objects", key), headers=headers)
        try:
            response = self._http.send(request, stream=True)
        except httpx.TransportError as exc:
            raise ConveyorError(f"cannot reach the Conveyor server: {exc}") from exc
        if response.status_code >= 400:
            response.read()
            response.close()
            raise _error(response)
        info = msgspec.json.decode(response.headers["conveyor-object"], type=r2.Object).to_model()
        return info, _RemoteBody(response)

    def get_nowait(self, account: str, bucket: str, key: str) -> tuple[ObjectInfo, Any] | None:
        return None  # every read is a request to the server

    def delete(self, account: str, bucket: str, keys: list[str], action: Action = "DeleteObject") -> list[str]:
        deleted: list[str] = []
        for key in keys:
            if self._result(r2.Deleted, "DELETE", self._object_path(account, bucket, "objects", key)).deleted:
                deleted.append(key)
        return deleted

    def copy(self, account: str, bucket: str, source: str, destination: str) -> ObjectInfo:
        body = wire_module.encode(r2.CopyRequest(source, destination))
        return self._result(r2.Object, "POST", self._bucket_path(account, bucket) + "/copy", content=body).to_model()

    def list_objects(self, account: str, bucket: str, prefix: str, start_after: str) -> Iterator[ObjectInfo]:
        after = start_after
        while True:
            params = {"prefix": prefix, "start_after": after, "limit": "1000"}
            path = self._bucket_path(account, bucket) + "/objects"
            page = self._result(r2.ObjectList, "GET", path, params=params).objects
            yield from (o.to_model() for o in page)
            if len(page) < 1000:
                return
            after = page[-1].key

    # -- rules --------------------------------------------------------------------------------
    def add_notification(
        self,
        account: str,
        bucket: str,
        queue_id: str,
        queue_name: str,
        actions: Any,
        prefix: Any,
        suffix: Any,
        description: Any,
    ) -> NotificationRule:
        body = {"queue": queue_name, "actions": actions, "prefix": prefix, "suffix": suffix, "description": description}
        path = self._bucket_path(account, bucket) + "/notifications"
        return self._result(r2.NotificationRuleShape, "POST", path, json=body).to_model()

    def notifications(self, account: str, bucket: str) -> list[NotificationRule]:
        path = self._bucket_path(account, bucket) + "/notifications"
        return [r.to_model() for r in self._result(list[r2.NotificationRuleShape], "GET", path)]

    def remove_notification(self, account: str, bucket: str, rule_id: str) -> None:
        self._send("DELETE", f"{self._bucket_path(account, bucket)}/notifications/{quote(rule_id, safe='')}")

    def add_lifecycle_rule(self, account: str, bucket: str, prefix: Any, max_age_seconds: Any) -> LifecycleRule:
        body = {"max_age_seconds": max_age_seconds, "prefix": prefix}
        path = self._bucket_path(account, bucket) + "/lifecycle"
        return self._result(r2.LifecycleRuleShape, "POST", path, json=body).to_model()

    def lifecycle_rules(self, account: str, bucket: str) -> list[LifecycleRule]:
        path = self._bucket_path(account, bucket) + "/lifecycle"
        return [r.to_model() for r in self._result(list[r2.LifecycleRuleShape], "GET", path)]

    def remove_lifecycle_rule(self, account: str, bucket: str, rule_id: str) -> None:
        self._send("DELETE", f"{self._bucket_path(account, bucket)}/lifecycle/{quote(rule_id, safe='')}")
