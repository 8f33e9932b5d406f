"""Storage beside the queues: KV namespaces (:mod:`conveyor.storage.kv`), and buckets on obstore
(a directory of the deployment or any S3-compatible service), with each
object's metadata in the engine, R2's event notifications into queues, and lifecycle rules.

>>> b = cv.create_bucket("cdn")
>>> b.put("a.txt", b"hello", content_type="text/plain").size
5
>>> b.add_notification("files-written", actions=["PutObject"], suffix=".txt")

KV is :mod:`conveyor.storage.kv` (its own module).
"""

from conveyor.storage.bucket import Bucket, ObjectBody
from conveyor.storage.errors import (
    BucketExists,
    BucketNotEmpty,
    BucketNotFound,
    BucketStorageError,
    BucketUnauthorized,
    BucketUnreachable,
    InvalidBucketLocation,
    InvalidBucketName,
    InvalidLifecycleRule,
    InvalidNotificationRule,
    InvalidObjectKey,
    InvalidObjectMetadata,
    ObjectExists,
    ObjectNotFound,
    RuleNotFound,
)
from conveyor.storage.model import BucketInfo, LifecycleRule, NotificationRule, ObjectInfo

__all__ = [
    "Bucket",
    "BucketExists",
    "BucketInfo",
    "BucketNotEmpty",
    "BucketNotFound",
    "BucketStorageError",
    "BucketUnauthorized",
    "BucketUnreachable",
    "InvalidBucketLocation",
    "InvalidBucketName",
    "InvalidLifecycleRule",
    "InvalidNotificationRule",
    "InvalidObjectKey",
    "InvalidObjectMetadata",
    "LifecycleRule",
    "NotificationRule",
    "ObjectBody",
    "ObjectExists",
    "ObjectInfo",
    "ObjectNotFound",
    "RuleNotFound",
]
