"""What the storage API returns: buckets, objects and rules (frozen dataclasses; no secrets)."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Literal

Location = Literal["local", "file", "s3"]
Action = Literal["PutObject", "CopyObject", "CompleteMultipartUpload", "DeleteObject", "LifecycleDeletion"]
ACTIONS: tuple[Action, ...] = (
    "PutObject",
    "CopyObject",
    "CompleteMultipartUpload",
    "DeleteObject",
    "LifecycleDeletion",
)
# wrangler's --event-type names for groups of actions.
ACTION_GROUPS: Mapping[str, tuple[Action, ...]] = {
    "object-create": ("PutObject", "CompleteMultipartUpload", "CopyObject"),
    "object-delete": ("DeleteObject", "LifecycleDeletion"),
}


def from_ms(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


@dataclasses.dataclass(frozen=True)
class BucketInfo:
    """A bucket: where its bytes live (``location`` ``local``, ``file`` or ``s3``; ``url`` and
    ``endpoint`` for the latter two). Credentials are never part of it."""

    name: str
    location: Location
    url: str
    endpoint: str
    region: str
    created: datetime.datetime


@dataclasses.dataclass(frozen=True)
class ObjectInfo:
    """One object's metadata, as the engine keeps it: ``size`` in bytes, ``etag`` (opaque, quotes
    stripped), ``sha256`` (hex of the content), ``uploaded`` (UTC), ``content_type`` and the custom
    ``metadata``."""

    key: str
    size: int
    etag: str
    uploaded: datetime.datetime
    sha256: str
    content_type: str
    metadata: Mapping[str, str]


@dataclasses.dataclass(frozen=True)
class NotificationRule:
    """A rule sending R2's event message to ``queue`` for writes matching ``actions``, ``prefix``
    and ``suffix`` (empty: any key)."""

    rule_id: str
    queue: str
    queue_id: str
    actions: tuple[Action, ...]
    prefix: str
    suffix: str
    description: str
    created: datetime.datetime


@dataclasses.dataclass(frozen=True)
class LifecycleRule:
    """Objects under ``prefix`` are deleted once they are ``max_age_seconds`` old (``LifecycleDeletion``)."""

    rule_id: str
    prefix: str
    max_age_seconds: int
    created: datetime.datetime
