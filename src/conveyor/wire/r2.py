"""R2's bucket management and event-notification configuration, as the ``cloudflare`` SDK's
``r2.buckets.*`` and ``r2.buckets.event_notifications.*`` send and read them
(``types/r2/bucket*.py``, ``types/r2/buckets/event_notification_*.py``)."""

from __future__ import annotations

from typing import Literal

import msgspec
from msgspec import UNSET, UnsetType

from conveyor.storage.model import Action, BucketInfo, NotificationRule
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
    url: str
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
