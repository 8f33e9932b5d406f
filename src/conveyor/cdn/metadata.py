"""The published catalog's metadata in KV, laid out as cdnjs's metadata backend serves it, and the
one way readers get at it.

One KV namespace per account (``cdn-metadata``) holds, per package ``n`` and version ``v``:

- ``files/{n}/{v}``    → ``[file, ...]``: the version's files, without their ``.br``/``.gz``;
- ``sris/{n}/{v}``     → ``{"n/v/file": "sha512-..."}`` for its ``.js`` and ``.css`` files;
- ``objects/{n}/{v}``  → ``{object: [size, sha512 hex]}`` for every object published under
  ``{n}/{v}/`` (each file and its ``.br``/``.gz``): what ``audit`` checks the buckets against, and
  what a re-run must reproduce byte for byte;
- ``versions/{n}/{v}`` → ``{"published_ms": ...}``: the version's entry in the version list, the
  LAST write of a publish. A version without it does not exist for any reader, whatever else of it
  is written, so no reader ever sees half a version;
- ``packages/{n}``     → the package record ``{name, description, keywords, version, filename?,
  homepage?, license?, author?, repository?, autoupdate?{source, target}}``, written after a version
  entry; ``version`` is the newest stable semver of the listed versions.

The version list of a package is the listing of ``versions/{n}/``: one key per version, so two
versions published at once never overwrite each other's entry.

>>> catalog = Catalog(metadata_namespace(cv))
>>> catalog.versions("jquery")                     # newest first, as cdnjs sorts them
['3.7.1', '3.7.0']
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import conveyor
from conveyor.cdn.registry import semver_key
from conveyor.storage.kv_errors import KVNamespaceExists
from conveyor.storage.kv_handle import KVNamespace

METADATA_NAMESPACE = "cdn-metadata"

# The API's file whitelist: extension → category (api.cdnjs.com's /whitelist); a version's ``files``
# are its ``rawFiles`` with one of these extensions.
CATEGORIES = {
    "js": "JavaScript",
    "mjs": "JavaScript",
    "ts": "TypeScript",
    "wasm": "WebAssembly",
    "map": "Source Maps",
    "swf": "Flash",
    "json": "JSON",
    "css": "Styling",
    "scss": "Styling",
    "png": "Images",
    "gif": "Images",
    "jpg": "Images",
    "jpeg": "Images",
    "svg": "Images",
    "webp": "Images",
    "cur": "Images",
    "ttf": "Fonts",
    "eot": "Fonts",
    "woff": "Fonts",
    "woff2": "Fonts",
    "otf": "Fonts",
    "aac": "Audio",
    "mp3": "Audio",
    "ogg": "Audio",
    "lang": "Other",
    "hpb": "Other",
}
UNCOMPRESSED_EXTENSIONS = (".woff2",)  # stored and served as they are: no .br/.gz copies
# What cdnjs's origin serves: the API's whitelist and avif; any other file type gets 403.
SERVED_EXTENSIONS = frozenset([*CATEGORIES, "avif"])


def served(path: str) -> bool:
    """Whether a file at ``path`` is of a type the CDN serves (its last extension, any case)."""
    _, dot, extension = path.rpartition("/")[2].rpartition(".")
    return bool(dot) and extension.lower() in SERVED_EXTENSIONS


def metadata_namespace(cv: conveyor.Conveyor) -> KVNamespace:
    """The account's ``cdn-metadata`` namespace, made if missing (by whichever process comes first)."""
    try:
        return cv.kv(METADATA_NAMESPACE, create=True)
    except KVNamespaceExists:  # another process made it between our look and our create
        return cv.kv(METADATA_NAMESPACE)


def files_key(name: str, version: str) -> str:
    return f"files/{name}/{version}"


def sris_key(name: str, version: str) -> str:
    return f"sris/{name}/{version}"


def objects_key(name: str, version: str) -> str:
    return f"objects/{name}/{version}"


def version_key(name: str, version: str) -> str:
    return f"versions/{name}/{version}"


def package_key(name: str) -> str:
    return f"packages/{name}"


def object_names(file: str) -> list[str]:
    """The objects one published file is stored as: itself and, but for ``.woff2``, its ``.br`` and
    ``.gz``."""
    return [file] if file.endswith(UNCOMPRESSED_EXTENSIONS) else [file, f"{file}.br", f"{file}.gz"]


def whitelisted(file: str) -> bool:
    return file.rsplit(".", 1)[-1] in CATEGORIES if "." in file else False


_COERCE = re.compile(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def _version_order(version: str) -> tuple[int, Any]:
    """cdnjs's order, newest first: valid semver, then coercible ones, then numeric-collated strings."""
    key = semver_key(version)
    if key is not None and not version.startswith("v"):
        return (0, key)
    found = _COERCE.search(version)
    if found is not None:
        return (1, tuple(int(part or 0) for part in found.groups()))
    return (2, tuple((0, int(p)) if p.isdigit() else (1, p.lower()) for p in re.split(r"(\d+)", version) if p))


def sort_versions(versions: Iterable[str]) -> list[str]:
    """Newest first, as api.cdnjs.com sorts a version list."""
    listed = list(versions)
    groups: dict[int, list[tuple[Any, str]]] = {0: [], 1: [], 2: []}
    for version in listed:
        group, key = _version_order(version)
        groups[group].append((key, version))
    return [v for group in (0, 1, 2) for _, v in sorted(groups[group], key=lambda kv: kv[0], reverse=True)]


def newest_stable(versions: Iterable[str]) -> str | None:
    """The newest semver release (no pre-release part) of ``versions``, or None."""
    stable = [(key, v) for v in versions if (key := semver_key(v)) is not None and key[3] == 1]
    return max(stable)[1] if stable else None


class Catalog:
    """What readers see of the published catalog: only versions with a version-list entry."""

    def __init__(self, kv: KVNamespace) -> None:
        self.kv = kv

    def package_names(self) -> list[str]:
        """Every package with a published version (its record is written after its first version)."""
        return [key.name[len("packages/") :] for key in self.kv.list(prefix="packages/")]

    def package(self, name: str) -> dict[str, Any] | None:
        found = self.kv.get(package_key(name), type="json")
        return found if isinstance(found, dict) else None

    def packages(self, names: list[str]) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        for start in range(0, len(names), 100):
            found = self.kv.get_many([package_key(n) for n in names[start : start + 100]], type="json")
            records.extend(v for v in found.values() if isinstance(v, dict))
        return records

    def versions(self, name: str) -> list[str]:
        prefix = f"versions/{name}/"
        return sort_versions(key.name[len(prefix) :] for key in self.kv.list(prefix=prefix))

    def published(self, name: str, version: str) -> dict[str, Any] | None:
        """The version-list entry (``{"published_ms": ...}``), or None: the gate every reader passes."""
        found = self.kv.get(version_key(name, version), type="json")
        return found if isinstance(found, dict) else None

    def files(self, name: str, version: str) -> list[str] | None:
        """The version's files, or None when it is not published."""
        if self.published(name, version) is None:
            return None
        found = self.kv.get(files_key(name, version), type="json")
        return list(found) if isinstance(found, list) else []

    def sris(self, name: str, version: str) -> dict[str, str]:
        found = self.kv.get(sris_key(name, version), type="json")
        return dict(found) if isinstance(found, dict) else {}

    def objects(self, name: str, version: str) -> dict[str, list[Any]]:
        found = self.kv.get(objects_key(name, version), type="json")
        return dict(found) if isinstance(found, dict) else {}
