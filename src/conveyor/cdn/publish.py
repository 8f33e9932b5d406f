"""Publishing: a processed version's files to the primary and mirror buckets, its metadata to KV,
its package to the search index — each step idempotent, the version visible only at the end.

:class:`Publisher` holds the steps PublishingWorkflow (``cdn-publish-version``, in
:mod:`conveyor.cdn.pipeline`) runs, and ``import`` reuses:

1. :meth:`Publisher.plan`: the version must be ``processed``; every file it recorded must be in the
   staging bucket with its ``.br`` and ``.gz`` (but ``.woff2``), or the version fails and nothing is
   published;
2. :meth:`Publisher.copy`, a batch of files a step: each object to ``{name}/{version}/{object}`` in
   the primary bucket and the mirror, written only where absent. An object already there with other
   bytes is never overwritten: the publish is refused and logged (a published file never changes);
3. :meth:`Publisher.write_metadata`: the version's file list, SRIs and object hashes to KV in one
   write (refused, likewise, if a different object list was published before);
4. :meth:`Publisher.make_visible`: the version-list entry, the last write of the version;
5. :meth:`Publisher.write_package`: the search index and the package record (its ``version`` the
   newest stable semver of the version list), rewritten until it agrees with the list it was made
   from, so versions published at once leave the newest in it.

>>> publisher = Publisher(cv, store, settings)
>>> count = publisher.plan("jquery", "3.7.1"); objects = publisher.copy("jquery", "3.7.1", 0, count)
"""

from __future__ import annotations

import hashlib
import logging
import mimetypes
import time
from collections.abc import Mapping
from typing import Any

import conveyor
from conveyor.cdn.config import CdnSettings
from conveyor.cdn.metadata import (
    Catalog,
    files_key,
    metadata_namespace,
    newest_stable,
    object_names,
    objects_key,
    package_key,
    sort_versions,
    sris_key,
    version_key,
)
from conveyor.cdn.store import CdnStore
from conveyor.storage.kv_handle import KVNamespace

log = logging.getLogger("conveyor.cdn")
COPY_BATCH = 50  # files a copy step writes: a crash repeats at most this many
PACKAGE_RECORD_ROUNDS = 20


def staged_key(name: str, version: str, dest: str) -> str:
    return f"files/{name}/{version}/{dest}"


def published_key(name: str, version: str, dest: str) -> str:
    return f"{name}/{version}/{dest}"


def content_type(path: str) -> str:
    """The media type of a published file by its extension (of the original, for ``.br``/``.gz``)."""
    base = path.removesuffix(".br").removesuffix(".gz") if path.endswith((".br", ".gz")) else path
    found, _ = mimetypes.guess_type(base, strict=False)
    if base.endswith((".js", ".mjs")):
        return "application/javascript"
    return found or "application/octet-stream"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _refuse(message: str) -> conveyor.NonRetryableError:
    log.error("cdn publish refused: %s", message)
    return conveyor.NonRetryableError(message)


def levenshtein(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def package_record(config: Mapping[str, Any], versions: list[str], latest_files: list[str]) -> dict[str, Any]:
    """The package record cdnjs's metadata backend serves, from a package config (or an imported
    ``package.json``): ``version`` is the newest stable semver of ``versions`` (else the newest), and
    a ``filename`` the latest version lacks becomes its closest file by edit distance, as cdnjs's."""
    ordered = sort_versions(versions)
    version = newest_stable(ordered) or (ordered[0] if ordered else None)
    record: dict[str, Any] = {
        "name": config["name"],
        "description": config.get("description", ""),
        "keywords": list(config.get("keywords", [])),
        "version": version,
    }
    filename = config.get("filename")
    if isinstance(filename, str) and latest_files and filename not in latest_files:
        wanted = filename
        filename = min(latest_files, key=lambda f: (levenshtein(wanted, f), f))
    if filename:
        record["filename"] = filename
    for field in ("homepage", "license"):
        if isinstance(config.get(field), str):
            record[field] = config[field]
    authors = config.get("authors")
    if isinstance(authors, list) and authors:
        record["author"] = ", ".join(a["name"] for a in authors if isinstance(a, dict) and "name" in a)
    elif isinstance(config.get("author"), str):
        record["author"] = config["author"]
    repository = config.get("repository")
    if isinstance(repository, dict):
        record["repository"] = {"type": repository.get("type"), "url": repository.get("url")}
    autoupdate = config.get("autoupdate")
    if isinstance(autoupdate, dict):
        record["autoupdate"] = {"source": autoupdate.get("source"), "target": autoupdate.get("target")}
    return record


def search_fields(record: Mapping[str, Any]) -> dict[str, str]:
    repository = record.get("repository")
    return {
        "name": str(record["name"]),
        "description": str(record.get("description") or ""),
        "keywords": " ".join(str(k) for k in record.get("keywords") or []),
        "filename": str(record.get("filename") or ""),
        "repository": str(repository.get("url") or "") if isinstance(repository, dict) else "",
    }


class Publisher:
    """The publishing steps of one account's CDN (see the module's docstring)."""

    def __init__(self, cv: conveyor.Conveyor, store: CdnStore, settings: CdnSettings) -> None:
        self.cv = cv
        self.store = store
        self.settings = settings
        self.account = settings.account
        self._kv: KVNamespace | None = None

    @property
    def kv(self) -> KVNamespace:
        if self._kv is None:
            self._kv = metadata_namespace(self.cv)
        return self._kv

    def targets(self) -> list[conveyor.Bucket]:
        names = [self.settings.primary_bucket]
        if self.settings.mirror_bucket:
            names.append(self.settings.mirror_bucket)
        return [self.cv.bucket(name) for name in names]

    # -- 1 -----------------------------------------------------------------------------------------
    def plan(self, name: str, version: str) -> int:
        """How many files the version has, once it is processed and every compressed copy is
        staged (the steps' outputs stay small: each later step reads its files from the store)."""
        row = self.store.version(self.account, name, version)
        if row is None:
            raise _refuse(f"{name}@{version}: no such version in the CDN")
        if row.state not in ("processed", "published"):
            raise _refuse(f"{name}@{version}: is {row.state}, not processed")
        files = self.store.files(self.account, name, version)
        if not files:
            raise _refuse(f"{name}@{version}: has no processed file")
        staging = self.cv.bucket(self.settings.staging_bucket)
        missing = [
            staged_key(name, version, obj)
            for file in files
            for obj in object_names(file.dest)[1:]
            if not staging.exists(staged_key(name, version, obj))
        ]
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise _refuse(
                f"{name}@{version}: is processed but {len(missing)} compressed copies are missing from the "
                f"staging bucket {self.settings.staging_bucket!r} ({shown}); nothing was published"
            )
        return len(files)

    def _files(self, name: str, version: str) -> list[dict[str, Any]]:
        files = self.store.files(self.account, name, version)
        return [{"dest": f.dest, "size": f.size, "sha512": f.sha512, "sri": f.sri} for f in files]

    # -- 2 -----------------------------------------------------------------------------------------
    def copy(self, name: str, version: str, start: int, count: int) -> dict[str, list[Any]]:
        """Copy ``count`` of the version's files from the ``start``-th (in name order) and their
        compressed copies from staging to every target bucket; their ``{object: [size, sha512 hex]}``."""
        files = self._files(name, version)[start : start + count]
        staging = self.cv.bucket(self.settings.staging_bucket)
        targets = self.targets()
        hashes: dict[str, list[Any]] = {}
        for file in files:
            for obj in object_names(file["dest"]):
                data = staging.get(staged_key(name, version, obj)).bytes()
                digest = hashlib.sha512(data).hexdigest()
                if obj == file["dest"] and (len(data), digest) != (file["size"], file["sha512"]):
                    raise _refuse(f"{name}@{version}: staged {obj} is not the file that was processed")
                for bucket in targets:
                    self.put_once(bucket, published_key(name, version, obj), data)
                hashes[obj] = [len(data), digest]
        return hashes

    def put_once(self, bucket: conveyor.Bucket, key: str, data: bytes) -> bool:
        """Write ``data`` at ``key`` unless the same bytes are there (False); other bytes there are
        refused, never overwritten."""
        sha256 = hashlib.sha256(data).hexdigest()
        try:
            found = bucket.head(key)
        except conveyor.ObjectNotFound:
            try:
                bucket.put(key, data, content_type=content_type(key), only_if_absent=True)
                return True
            except conveyor.ObjectExists:  # a concurrent run wrote it first
                found = bucket.head(key)
        if found.sha256 != sha256:
            raise _refuse(
                f"{bucket.name}/{key} is published with other bytes (sha256 {found.sha256}, now {sha256}): "
                "a published file never changes, nothing was written"
            )
        return False

    # -- 3 -----------------------------------------------------------------------------------------
    def write_metadata(
        self, name: str, version: str, hashes: Mapping[str, list[Any]], files: list[dict[str, Any]] | None = None
    ) -> None:
        """The version's file list, SRIs and object hashes, in one KV write; ``files`` (``dest``,
        ``sri``) are the recorded ones unless given."""
        if files is None:
            files = self._files(name, version)
        before = self.kv.get(objects_key(name, version), type="json")
        if before is not None and before != dict(hashes):
            raise _refuse(f"{name}@{version}: is published with other files or bytes; its metadata stays as it was")
        sris = {f"{name}/{version}/{f['dest']}": f["sri"] for f in files if f.get("sri")}
        self.kv.put_many(
            [
                {"key": files_key(name, version), "value": [f["dest"] for f in files]},
                {"key": sris_key(name, version), "value": sris},
                {"key": objects_key(name, version), "value": dict(hashes)},
            ]
        )

    # -- 4 -----------------------------------------------------------------------------------------
    def make_visible(self, name: str, version: str, *, record: bool = True) -> int:
        """The version's entry in the version list (kept if there): from now on readers see it."""
        entry = self.kv.get(version_key(name, version), type="json")
        published_ms = int(entry["published_ms"]) if isinstance(entry, dict) else _now_ms()
        if entry is None:
            self.kv.put(version_key(name, version), {"published_ms": published_ms})
        if record:
            self.store.mark_published(self.account, name, version, now_ms=published_ms)
        return published_ms

    # -- 5 -----------------------------------------------------------------------------------------
    def write_package(self, name: str, config: Mapping[str, Any]) -> str | None:
        """The package's search entry and record, from ``config`` and the version list; its ``version``."""
        catalog = Catalog(self.kv)
        versions = catalog.versions(name)
        for _ in range(PACKAGE_RECORD_ROUNDS):
            ordered = sort_versions(versions)
            latest = newest_stable(ordered) or (ordered[0] if ordered else None)
            latest_files = (catalog.files(name, latest) or []) if latest else []
            record = package_record(config, versions, latest_files)
            self.store.index_package(self.account, name, search_fields(record))
            self.kv.put(package_key(name), record)
            again = catalog.versions(name)
            if again == versions:  # a version published meanwhile writes the record again itself
                return str(record["version"]) if record["version"] else None
            versions = again
        raise conveyor.NonRetryableError(f"{name}: its version list kept changing while its record was written")
