"""The refusals of buckets and objects, with R2's error codes where R2 has one."""

from __future__ import annotations

from conveyor.errors import ConveyorError, InvalidRequest


class InvalidBucketName(InvalidRequest):
    code = 10005


class InvalidObjectKey(InvalidRequest):
    code = 10020


class InvalidObjectMetadata(InvalidRequest):
    code = 10012


class InvalidBucketLocation(InvalidRequest):
    """A bucket's URL, endpoint or credentials that this deployment cannot use."""

    code = 10040


class InvalidNotificationRule(InvalidRequest):
    code = 10021


class InvalidLifecycleRule(InvalidRequest):
    code = 10022


class BucketNotFound(ConveyorError):
    code = 10006
    status = 404


class BucketExists(ConveyorError):
    code = 10004
    status = 409


class BucketNotEmpty(ConveyorError):
    code = 10008
    status = 409


class ObjectNotFound(ConveyorError):
    code = 10007
    status = 404


class ObjectExists(ConveyorError):
    """``only_if_absent=True`` and the key already holds an object (R2's PreconditionFailed)."""

    code = 10031
    status = 412


class RuleNotFound(ConveyorError):
    code = 10023
    status = 404


class BucketUnauthorized(ConveyorError):
    """The object service refused the bucket's credentials."""

    code = 10002
    status = 401


class BucketUnreachable(ConveyorError):
    """The object service did not answer in time, or refused the connection."""

    code = 10001
    status = 502


class BucketStorageError(ConveyorError):
    """Any other failure of the object service or the bucket's directory."""

    code = 10001
    status = 500
