"""The refusals of migration jobs (codes 16001 and up: Cloudflare publishes none for Super Slurper).
A source or target that cannot be reached or refuses its credentials raises the storage errors
(``BucketUnreachable``, ``BucketUnauthorized``, ``BucketNotFound``), named by where it is."""

from __future__ import annotations

from conveyor.errors import ConveyorError, InvalidRequest


class InvalidJob(InvalidRequest):
    """A job's ``source``, ``target`` or ``overwrite`` that is malformed or unsupported."""

    code = 16001


class JobNotFound(ConveyorError):
    """No job with this id in the account (a job of another account is not found either)."""

    code = 16002
    status = 404


class InvalidJobState(ConveyorError):
    """A pause, resume or abort that the job's status does not allow (resuming a running job)."""

    code = 16003
    status = 409


class TooManyJobs(ConveyorError):
    """The account already runs as many jobs as the configured limit allows."""

    code = 16004
    status = 429


class ChecksumMismatch(ConveyorError):
    """The bytes copied do not match the source's size or MD5 etag (retried as any failure)."""

    code = 16005
    status = 502
