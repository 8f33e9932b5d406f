"""R2's bucket management and event-notification configuration, as the ``cloudflare`` SDK's
``r2.buckets.*`` and ``r2.buckets.event_notifications.*`` send and read them
(``types/r2/bucket*.py``, ``types/r2/buckets/event_notification_*.py``)."""

from __future__ import annotations

import datetime
from typing import Literal

import msgspec
from msgspec import UNSET, UnsetType

from conveyor.storage.model import Action, BucketInfo, LifecycleRule, NotificationRule, ObjectInfo, from_ms
from conveyor.wire.decoding import Shape

LocationHint = Literal["apac", "eeur", "enam", "weur", "wnam", "oc"]


class BucketRequest(Shape, kw_only=True):
    name: str
    locationHint: LocationHint | UnsetType = UNSET
    storageClass: Literal["Standard"] | UnsetType = UNSET


class Bucket(Shape, kw_only=True):
    name: str
    creation_date: str
    storage_class: Literal["Standard"] = "Standard"
    jurisdiction: Literal["default"] = "default"


class BucketList(Shape):
    buckets: list[Bucket]


def bucket(info: BucketInfo) -> Bucket:
    return Bucket(name=info.name, creation_date=info.created.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z")


class RuleRequest(Shape, kw_only=True):
    actions: list[Action]
    prefix: str = ""
    suffix: str = ""
    description: str = ""


class NotificationRequest(Shape):
    rules: list[RuleRequest]


class RuleIds(Shape):
    rule_ids: list[str] = msgspec.field(name="ruleIds")


class Rule(Shape, kw_only=True):
    rule_id: str = msgspec.field(name="ruleId")
    created_at: str = msgspec.field(name="createdAt")
    actions: list[Action]
    prefix: str
    suffix: str
    description: str


class QueueRules(Shape, kw_only=True):
    queue_id: str = msgspec.field(name="queueId")
    queue_name: str = msgspec.field(name="queueName")
    rules: list[Rule]


class NotificationConfiguration(Shape, kw_only=True):
    bucket_name: str = msgspec.field(name="bucketName")
    queues: list[QueueRules]


def rule(r: NotificationRule) -> Rule:
    created = r.created.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return Rule(
        rule_id=r.rule_id,
        created_at=created,
        actions=list(r.actions),
        prefix=r.prefix,
        suffix=r.suffix,
        description=r.description,
    )


def queue_rules(queue_id: str, queue_name: str, rules: list[NotificationRule]) -> QueueRules:
    return QueueRules(queue_id=queue_id, queue_name=queue_name, rules=[rule(r) for r in rules])


# -- Conveyor's own bucket routes (/conveyor/v1/accounts/{account_id}/buckets) ------------------
class BucketLocationRequest(Shape, kw_only=True):
    """A bucket kept in an S3-compatible service (``url`` ``s3://bucket/prefix``) or a directory the
    operator declared shared (``file:///dir``)."""

    name: str
    url: str | None = None  # None: a directory of the (SQLite) deployment
    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None

    def __repr__(self) -> str:  # the secret never shows
        return f"BucketLocationRequest(name={self.name!r}, url={self.url!r}, endpoint={self.endpoint!r})"


class BucketLocation(Shape, kw_only=True):
    name: str
    location: Literal["local", "file", "s3"]
    url: str
    endpoint: str
    region: str
    created_on: str

    def to_model(self) -> BucketInfo:
        created = datetime.datetime.fromisoformat(self.created_on.replace("Z", "+00:00"))
        return BucketInfo(self.name, self.location, self.url, self.endpoint, self.region, created)


def bucket_location(info: BucketInfo) -> BucketLocation:
    created = info.created.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return BucketLocation(
        name=info.name,
        location=info.location,
        url=info.url,
        endpoint=info.endpoint,
        region=info.region,
        created_on=created,
    )


# -- Conveyor's object routes (/conveyor/v1/accounts/{account_id}/buckets/{bucket}/...) ---------
class Object(Shape, kw_only=True):
    key: str
    size: int
    etag: str
    uploaded_ms: int
    sha256: str
    content_type: str
    metadata: dict[str, str]

    def to_model(self) -> ObjectInfo:
        return ObjectInfo(
            self.key, self.size, self.etag, from_ms(self.uploaded_ms), self.sha256, self.content_type, self.metadata
        )


def object_shape(info: ObjectInfo) -> Object:
    return Object(
        key=info.key,
        size=info.size,
        etag=info.etag,
        uploaded_ms=int(info.uploaded.timestamp() * 1000),
        sha256=info.sha256,
        content_type=info.content_type,
        metadata=dict(info.metadata),
    )


class ObjectList(Shape):
    objects: list[Object]


class Deleted(Shape):
    deleted: int


class CopyRequest(Shape):
    source: str
    destination: str


class NotificationRuleRequest(Shape, kw_only=True):
    queue: str
    actions: list[str]
    prefix: str = ""
    suffix: str = ""
    description: str = ""


class NotificationRuleShape(Shape, kw_only=True):
    rule_id: str
    queue: str
    queue_id: str
    actions: list[Action]
    prefix: str
    suffix: str
    description: str
    created_ms: int

    def to_model(self) -> NotificationRule:
        return NotificationRule(
            self.rule_id,
            self.queue,
            self.queue_id,
            tuple(self.actions),
            self.prefix,
            self.suffix,
            self.description,
            from_ms(self.created_ms),
        )


def notification_rule(r: NotificationRule) -> NotificationRuleShape:
    return NotificationRuleShape(
        rule_id=r.rule_id,
        queue=r.queue,
        queue_id=r.queue_id,
        actions=list(r.actions),
        prefix=r.prefix,
        suffix=r.suffix,
        description=r.description,
        created_ms=int(r.created.timestamp() * 1000),
    )


class LifecycleRuleRequest(Shape, kw_only=True):
    max_age_seconds: int
    prefix: str = ""


class LifecycleRuleShape(Shape, kw_only=True):
    rule_id: str
    prefix: str
    max_age_seconds: int
    created_ms: int

    def to_model(self) -> LifecycleRule:
        return LifecycleRule(self.rule_id, self.prefix, self.max_age_seconds, from_ms(self.created_ms))


def lifecycle_rule(r: LifecycleRule) -> LifecycleRuleShape:
    return LifecycleRuleShape(
        rule_id=r.rule_id,
        prefix=r.prefix,
        max_age_seconds=r.max_age_seconds,
        created_ms=int(r.created.timestamp() * 1000),
    )
