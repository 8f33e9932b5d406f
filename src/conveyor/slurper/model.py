"""What a migration job is: its source and target (checked from a request's dicts), its status, its
progress and its log entries. Nothing here holds a secret in its ``repr`` or its public form.

>>> source = parse_source({"vendor": "s3", "bucket": "photos", "endpoint": "http://127.0.0.1:9000",
...                        "secret": {"accessKeyId": "AK", "secretAccessKey": "..."}})
>>> source.public()
{'vendor': 's3', 'bucket': 'photos', 'endpoint': 'http://127.0.0.1:9000', 'pathPrefix': None, 'keys': None}
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any, Literal

from conveyor.slurper.errors import InvalidJob

Status = Literal["running", "paused", "aborted", "completed"]
STATUSES: tuple[Status, ...] = ("running", "paused", "aborted", "completed")
# Cloudflare's log types: the job's own, and those of one object.
JOB_LOG_TYPES = (
    "migrationStart",
    "migrationComplete",
    "migrationAbort",
    "migrationError",
    "migrationPause",
    "migrationResume",
    "migrationErrorFailedContinuation",
)
OBJECT_LOG_TYPES = (
    "importErrorRetryExhaustion",
    "importSkippedStorageClass",
    "importSkippedOversized",
    "importSkippedEmptyObject",
    "importSkippedUnsupportedContentType",
    "importSkippedExcludedContentType",
    "importSkippedInvalidMedia",
    "importSkippedRequiresRetrieval",
)
LOG_TYPES = JOB_LOG_TYPES + OBJECT_LOG_TYPES
VENDORS = ("s3", "r2")
JURISDICTIONS = ("default", "eu", "us", "fedramp")
MAX_KEYS = 100_000
MAX_KEY_BYTES = 1024
# The wire's camelCase names and the Python API's snake_case ones, for the same fields.
_NAMES = {"pathPrefix": "path_prefix", "accessKeyId": "access_key_id", "secretAccessKey": "secret_access_key"}


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """A bucket a job reads or writes: ``vendor`` ``s3`` (any S3-compatible service at ``endpoint``)
    or ``r2`` (a Conveyor bucket of the job's account, found by name). The secret key never shows
    in a repr; :meth:`public` is what the API returns."""

    vendor: str
    bucket: str
    endpoint: str = ""
    region: str = ""
    access_key_id: str = ""
    secret_access_key: str = dataclasses.field(default="", repr=False)
    jurisdiction: str = ""
    path_prefix: str = ""
    keys: tuple[str, ...] | None = None

    def stored(self) -> dict[str, Any]:
        """Everything, secret included: the job row's JSON."""
        fields = dataclasses.asdict(self)
        fields["keys"] = list(self.keys) if self.keys is not None else None
        return fields

    @classmethod
    def from_stored(cls, fields: Mapping[str, Any]) -> Endpoint:
        keys = fields.get("keys")
        return cls(**{**fields, "keys": tuple(keys) if keys is not None else None})

    def public_source(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"vendor": self.vendor, "bucket": self.bucket}
        if self.endpoint:
            shown["endpoint"] = self.endpoint
        if self.jurisdiction:
            shown["jurisdiction"] = self.jurisdiction
        shown["pathPrefix"] = self.path_prefix or None
        shown["keys"] = list(self.keys) if self.keys is not None else None
        return shown

    def public_target(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"vendor": self.vendor, "bucket": self.bucket}
        if self.endpoint:
            shown["endpoint"] = self.endpoint
        shown["jurisdiction"] = self.jurisdiction or "default"
        return shown


def _normalized(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidJob(f"{what} must be an object with at least 'vendor' and 'bucket', not {type(value).__name__}")
    return {_NAMES.get(str(k), str(k)): v for k, v in value.items()}


def _text(fields: dict[str, Any], name: str, what: str, *, required: bool = False, limit: int = 1024) -> str:
    value = fields.pop(name, None)
    if value is None or value == "":
        if required:
            raise InvalidJob(f"{what}.{name} is required")
        return ""
    if not isinstance(value, str) or len(value.encode()) > limit:
        raise InvalidJob(f"{what}.{name} must be a string of at most {limit} bytes")
    return value


def _endpoint(value: object, what: str) -> tuple[Endpoint, dict[str, Any]]:
    fields = _normalized(value, what)
    vendor = fields.pop("vendor", None)
    if vendor == "gcs":
        raise InvalidJob(f"{what}.vendor 'gcs' is not supported yet; use 's3' (GCS's S3-compatible endpoint) or 'r2'")
    if vendor not in VENDORS:
        raise InvalidJob(f"{what}.vendor must be one of {', '.join(VENDORS)}, not {vendor!r}")
    bucket = _text(fields, "bucket", what, required=True, limit=255)
    secret = fields.pop("secret", None)
    access_key_id = secret_access_key = ""
    if secret is not None:
        parts = _normalized(secret, f"{what}.secret")
        access_key_id = _text(parts, "access_key_id", f"{what}.secret", required=True)
        secret_access_key = _text(parts, "secret_access_key", f"{what}.secret", required=True)
        if parts:
            raise InvalidJob(f"{what}.secret has unknown fields: {', '.join(sorted(parts))}")
    elif vendor == "s3":
        raise InvalidJob(f"{what}.secret {{accessKeyId, secretAccessKey}} is required for vendor 's3'")
    endpoint = _text(fields, "endpoint", what) if vendor == "s3" else ""
    if endpoint and not endpoint.startswith(("http://", "https://")):
        raise InvalidJob(f"{what}.endpoint must be an http:// or https:// URL, not {endpoint!r}")
    region = _text(fields, "region", what, limit=64) if vendor == "s3" else ""
    jurisdiction = _text(fields, "jurisdiction", what, limit=16)
    if jurisdiction and (vendor != "r2" or jurisdiction not in JURISDICTIONS):
        raise InvalidJob(f"{what}.jurisdiction is for vendor 'r2', one of {', '.join(JURISDICTIONS)}")
    spec = Endpoint(
        vendor=vendor,
        bucket=bucket,
        endpoint=endpoint.rstrip("/"),
        region=region,
        access_key_id=access_key_id,
        secret_access_key=secret_access_key,
        jurisdiction=jurisdiction,
    )
    return spec, fields


def parse_source(value: object) -> Endpoint:
    """The source of a job: ``{vendor, bucket, secret, endpoint?, region?, pathPrefix?, keys?}``."""
    spec, fields = _endpoint(value, "source")
    path_prefix = _text(fields, "path_prefix", "source")
    keys = fields.pop("keys", None)
    if keys is not None:
        if (
            not isinstance(keys, list | tuple)
            or not 1 <= len(keys) <= MAX_KEYS
            or not all(isinstance(k, str) and 0 < len(k.encode()) <= MAX_KEY_BYTES for k in keys)
        ):
            raise InvalidJob(
                f"source.keys must be a list of 1 to {MAX_KEYS} keys, each a string of 1 to {MAX_KEY_BYTES} bytes"
            )
        if path_prefix:
            raise InvalidJob("source takes pathPrefix or keys, not both")
        keys = tuple(sorted(set(keys)))
    if fields:
        raise InvalidJob(f"source has unknown fields: {', '.join(sorted(fields))}")
    return dataclasses.replace(spec, path_prefix=path_prefix, keys=keys)


def parse_target(value: object) -> Endpoint:
    """The target of a job: ``{vendor: "r2", bucket, secret?, jurisdiction?}`` (a Conveyor bucket of
    the account; a ``secret`` is accepted, as the SDK requires it, and not used) or ``{vendor: "s3",
    bucket, secret, endpoint?, region?}``."""
    spec, fields = _endpoint(value, "target")
    if fields:
        raise InvalidJob(f"target has unknown fields: {', '.join(sorted(fields))}")
    if spec.vendor == "r2":  # the bucket's own credentials are used, so none is kept
        spec = dataclasses.replace(spec, access_key_id="", secret_access_key="")
    return spec


def parse_overwrite(value: object) -> bool:
    if value is None:
        return True
    if not isinstance(value, bool):
        raise InvalidJob(f"overwrite must be true or false, not {value!r}")
    return value


def _time(ms: int | None) -> datetime.datetime | None:
    return None if ms is None else datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def iso(when: datetime.datetime) -> str:
    """A UTC time as the API shows it: ``2026-12-03T17:00:00.123000Z``."""
    return when.isoformat().replace("+00:00", "Z")


@dataclasses.dataclass(frozen=True)
class JobProgress:
    """How far a job is: ``objects`` listed so far, and how many of them are transferred, skipped
    or failed (their sum is ``objects`` once the job is completed)."""

    id: str
    created_at: datetime.datetime
    status: Status
    objects: int
    transferred_objects: int
    skipped_objects: int
    failed_objects: int
    listed_bytes: int
    transferred_bytes: int
    listing_finished: bool


@dataclasses.dataclass(frozen=True)
class JobInfo:
    """A job as the API shows it: no secrets."""

    id: str
    created_at: datetime.datetime
    finished_at: datetime.datetime | None
    overwrite: bool
    status: Status
    source: Mapping[str, Any]
    target: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class JobLog:
    """One log entry of a job: a job event (``migrationStart`` ...) or an object's
    (``importErrorRetryExhaustion`` ..., with ``object_key``)."""

    created_at: datetime.datetime
    job: str
    log_type: str
    message: str
    object_key: str | None


@dataclasses.dataclass(frozen=True)
class JobRow:
    """A job row as the pipeline reads it (secrets included: never returned by the API)."""

    id: str
    account: str
    created_ms: int
    finished_ms: int | None
    status: Status
    overwrite: bool
    source: Endpoint
    target: Endpoint
    objects: int
    transferred: int
    skipped: int
    failed: int
    bytes_listed: int
    bytes_transferred: int
    next_listing: int
    listing_after: str
    listing_done: bool
    lifecycle_tick: int

    def info(self) -> JobInfo:
        return JobInfo(
            self.id,
            _created(self.created_ms),
            _time(self.finished_ms),
            self.overwrite,
            self.status,
            self.source.public_source(),
            self.target.public_target(),
        )

    def progress(self) -> JobProgress:
        return JobProgress(
            self.id,
            _created(self.created_ms),
            self.status,
            self.objects,
            self.transferred,
            self.skipped,
            self.failed,
            self.bytes_listed,
            self.bytes_transferred,
            self.listing_done,
        )


def _created(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def log_entry(job: str, created_ms: int, log_type: str, message: str, object_key: str | None) -> JobLog:
    return JobLog(_created(created_ms), job, log_type, message, object_key)
