"""Super Slurper's REST shapes, as the ``cloudflare`` SDK's ``r2.super_slurper.*`` send and read them
(``types/r2/super_slurper/*.py``): camelCase on the wire, every field of a request checked again by
:mod:`conveyor.slurper.model` (which names the field of any mistake).

>>> wire.decode(b'{"source": {"vendor": "r2", "bucket": "a"}, "target": {"vendor": "r2", "bucket": "b"}}',
...             SlurperJobRequest).overwrite
True
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from conveyor.slurper.errors import InvalidJob
from conveyor.slurper.model import JobInfo, JobLog, JobProgress, iso
from conveyor.wire.decoding import Shape

Vendor = Literal["s3", "r2", "gcs"]
Jurisdiction = Literal["default", "eu", "us", "fedramp"]
Status = Literal["running", "paused", "aborted", "completed"]


class SlurperSecret(Shape, kw_only=True):
    refusal = InvalidJob

    access_key_id: str = msgspec.field(name="accessKeyId")
    secret_access_key: str = msgspec.field(name="secretAccessKey")


class SlurperSource(Shape, kw_only=True):
    refusal = InvalidJob

    vendor: Vendor
    bucket: str
    secret: SlurperSecret | None = None
    endpoint: str | None = None
    region: str | None = None
    path_prefix: str | None = msgspec.field(default=None, name="pathPrefix")
    keys: list[str] | None = None
    jurisdiction: Jurisdiction | None = None


class SlurperTarget(Shape, kw_only=True):
    refusal = InvalidJob

    vendor: Literal["r2", "s3"]
    bucket: str
    secret: SlurperSecret | None = None
    endpoint: str | None = None
    region: str | None = None
    jurisdiction: Jurisdiction | None = None


class SlurperJobRequest(Shape, kw_only=True):
    refusal = InvalidJob

    source: SlurperSource
    target: SlurperTarget
    overwrite: bool = True


def fields(shape: SlurperSource | SlurperTarget) -> dict[str, Any]:
    """A decoded source or target as the dict :mod:`conveyor.slurper.model` checks (wire names)."""
    return {k: v for k, v in msgspec.to_builtins(shape).items() if v is not None}


class SlurperJobCreated(Shape):
    id: str


class SlurperJob(Shape, kw_only=True):
    id: str
    created_at: str = msgspec.field(name="createdAt")
    finished_at: str | None = msgspec.field(name="finishedAt")
    overwrite: bool
    status: Status
    source: dict[str, Any]
    target: dict[str, Any]


class SlurperProgress(Shape, kw_only=True):
    id: str
    created_at: str = msgspec.field(name="createdAt")
    status: Status
    objects: int
    transferred_objects: int = msgspec.field(name="transferredObjects")
    skipped_objects: int = msgspec.field(name="skippedObjects")
    failed_objects: int = msgspec.field(name="failedObjects")
    # Conveyor's, beyond Cloudflare's fields (the SDK keeps them): bytes, and whether listing ended.
    listed_bytes: int = msgspec.field(default=0, name="listedBytes")
    transferred_bytes: int = msgspec.field(default=0, name="transferredBytes")
    listing_finished: bool = msgspec.field(default=False, name="listingFinished")


class SlurperLog(Shape, kw_only=True):
    created_at: str = msgspec.field(name="createdAt")
    job: str
    log_type: str = msgspec.field(name="logType")
    message: str
    object_key: str | None = msgspec.field(name="objectKey")


class SlurperConnectivity(Shape):
    """The precheck's answer; ``message`` (Conveyor's) says what went wrong."""

    connectivity_status: Literal["success", "error"] = msgspec.field(name="connectivityStatus")
    message: str | UnsetType = UNSET


def job(info: JobInfo) -> SlurperJob:
    return SlurperJob(
        id=info.id,
        created_at=iso(info.created_at),
        finished_at=iso(info.finished_at) if info.finished_at else None,
        overwrite=info.overwrite,
        status=info.status,
        source=dict(info.source),
        target=dict(info.target),
    )


def progress(p: JobProgress) -> SlurperProgress:
    return SlurperProgress(
        id=p.id,
        created_at=iso(p.created_at),
        status=p.status,
        objects=p.objects,
        transferred_objects=p.transferred_objects,
        skipped_objects=p.skipped_objects,
        failed_objects=p.failed_objects,
        listed_bytes=p.listed_bytes,
        transferred_bytes=p.transferred_bytes,
        listing_finished=p.listing_finished,
    )


def log(entry: JobLog) -> SlurperLog:
    return SlurperLog(
        created_at=iso(entry.created_at),
        job=entry.job,
        log_type=entry.log_type,
        message=entry.message,
        object_key=entry.object_key,
    )
