"""A bucket's bytes through obstore: a directory (``LocalStore``) or an S3-compatible service
(``S3Store``), with bounded timeouts, durable local writes and obstore's errors turned into
Conveyor's.

obstore's local store writes a temporary file and renames it into place without ``fsync``, so a
local put here fsyncs the file and every directory from its parent up to the bucket's root before
it returns: the bytes and their name survive a power cut, as a send's message does.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import obstore
from obstore import exceptions as obstore_errors
from obstore.store import LocalStore, S3Store

from conveyor.errors import ConveyorError, StorageFull
from conveyor.storage.errors import (
    BucketStorageError,
    BucketUnauthorized,
    BucketUnreachable,
    InvalidBucketLocation,
    ObjectExists,
    ObjectNotFound,
)
from conveyor.storage.model import Location

T = TypeVar("T")

# Bounded waits for an S3-compatible service: an unreachable endpoint fails within about
# CONNECT_TIMEOUT x (MAX_RETRIES + 1) plus backoff, never hangs.
CONNECT_TIMEOUT = datetime.timedelta(seconds=3)
REQUEST_TIMEOUT = datetime.timedelta(seconds=60)
MAX_RETRIES = 2
RETRY_TIMEOUT = datetime.timedelta(seconds=10)


@dataclasses.dataclass(frozen=True)
class BucketConfig:
    """Where a bucket's bytes live. ``secret_access_key`` never shows in a repr."""

    location: Location
    url: str = ""
    endpoint: str = ""
    region: str = ""
    access_key_id: str = ""
    secret_access_key: str = dataclasses.field(default="", repr=False)
    directory: str = ""  # a local or file bucket's directory

    def describe(self) -> str:
        if self.location == "s3":
            return f"{self.url} at {self.endpoint or 'AWS'}"
        return self.directory


def file_directory(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
        raise InvalidBucketLocation(f"bucket URL {url!r}: a directory is given as file:///absolute/path")
    return os.path.normpath(parts.path)


def s3_bucket_and_prefix(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment or "@" in parts.netloc:
        raise InvalidBucketLocation(
            f"bucket URL {url!r}: an S3-compatible bucket is given as s3://bucket/optional/prefix"
        )
    return parts.netloc, parts.path.strip("/")


def open_store(config: BucketConfig) -> Any:
    """The obstore store of ``config`` (a local store creates its directory)."""
    if config.location != "s3":
        return LocalStore(config.directory, mkdir=True)
    bucket, prefix = s3_bucket_and_prefix(config.url)
    s3_config: dict[str, Any] = {"virtual_hosted_style_request": False} if config.endpoint else {}
    if config.endpoint:
        s3_config["endpoint"] = config.endpoint
    if config.region:
        s3_config["region"] = config.region
    if config.access_key_id:
        s3_config["access_key_id"] = config.access_key_id
        s3_config["secret_access_key"] = config.secret_access_key
    else:
        s3_config["skip_signature"] = True
    return S3Store(
        bucket,
        prefix=prefix or None,
        config=s3_config,  # type: ignore[arg-type]
        client_options={
            "connect_timeout": CONNECT_TIMEOUT,
            "timeout": REQUEST_TIMEOUT,
            "allow_http": config.endpoint.startswith("http://"),
        },
        retry_config={
            "max_retries": MAX_RETRIES,
            "retry_timeout": RETRY_TIMEOUT,
            "backoff": {
                "init_backoff": datetime.timedelta(milliseconds=100),
                "max_backoff": datetime.timedelta(seconds=1),
                "base": 2,
            },
        },
    )


def translated(config: BucketConfig, what: str, fn: Callable[[], T]) -> T:
    """Run an obstore call, raising Conveyor's error for what went wrong. Messages name the bucket's
    location, never its credentials."""
    try:
        return fn()
    except ConveyorError:
        raise
    except obstore_errors.NotFoundError:
        raise ObjectNotFound(f"{what}: no such object in {config.describe()}") from None
    except (obstore_errors.AlreadyExistsError, obstore_errors.PreconditionError):
        raise ObjectExists(f"{what}: the key already holds an object") from None
    except (obstore_errors.PermissionDeniedError, obstore_errors.UnauthenticatedError) as exc:
        raise BucketUnauthorized(
            f"{what}: {config.describe()} refused the bucket's credentials: {_first_line(exc)}"
        ) from None
    except OSError as exc:
        raise _os_error(config, what, exc) from None
    except obstore_errors.BaseError as exc:
        text = _scrub(str(exc), config)
        lowered = text.lower()
        if "no space left" in lowered or "os error 28" in lowered or "quota exceeded" in lowered:
            raise StorageFull(
                f"{what}: the disk of {config.describe()} is full; nothing of this write was kept"
            ) from None
        if any(
            word in lowered
            for word in ("403", "forbidden", "invalidaccesskeyid", "signaturedoesnotmatch", "access denied")
        ):
            raise BucketUnauthorized(
                f"{what}: {config.describe()} refused the bucket's credentials: {_first_line(text)}"
            ) from None
        if any(word in lowered for word in ("connect", "timed out", "timeout", "dns error", "unreachable", "refused")):
            raise BucketUnreachable(
                f"{what}: cannot reach {config.describe()} (connect timeout {CONNECT_TIMEOUT.total_seconds():.0f} s, "
                f"{MAX_RETRIES} retries): {_first_line(text)}"
            ) from None
        raise BucketStorageError(f"{what} on {config.describe()} failed: {_first_line(text)}") from None


def _os_error(config: BucketConfig, what: str, exc: OSError) -> ConveyorError:
    import errno

    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageFull(f"{what}: the disk of {config.describe()} is full; nothing of this write was kept")
    return BucketStorageError(f"{what} on {config.describe()} failed: {exc.strerror or exc}")


def _scrub(text: str, config: BucketConfig) -> str:
    if len(config.secret_access_key) >= 8:
        text = text.replace(config.secret_access_key, "***")
    return text


def _first_line(exc: object) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ".join(lines[:3])[:500]


def missing_directories(directory: str, key: str) -> list[Path]:
    """The directories a local put of ``key`` will create (deepest first), to flush after it."""
    root = Path(directory)
    missing: list[Path] = []
    parent = (root / key).parent
    while parent != root and root in parent.parents and not parent.is_dir():
        missing.append(parent)
        parent = parent.parent
    return missing


def fsync_local(directory: str, key: str, created: list[Path]) -> None:
    """Flush a local object's file, the directory naming it, and the parent of each directory the
    put ``created``, so the bytes and every name on their path survive a power cut."""
    path = Path(directory) / key
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)
    for parent in [path.parent, *(d.parent for d in created)]:
        fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def check_reachable(store: Any, config: BucketConfig) -> None:
    """One listing request, so wrong credentials or an unreachable endpoint are refused when the
    bucket is created, not at its first write."""
    translated(config, "checking the bucket", lambda: next(iter(obstore.list(store, chunk_size=1)), None))
