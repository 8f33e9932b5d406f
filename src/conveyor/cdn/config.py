"""cdnjs's package configs (``packages/<letter>/<name>.json``) and the account's CDN settings.

``PackageConfig.parse`` applies cdnjs's schema (draft-07 with ``additionalProperties: false`` at
every level) and its checker's rules, refusing the first bad field with an error naming its JSON
path; the ``fileMap`` globs are checked and compiled once.

>>> config = PackageConfig.parse(json.loads(text), source="packages/j/jquery.json")
>>> config.name, config.target, config.file_map.select(["dist/jquery.js", "src/core.js"])
('jquery', 'jquery', {'dist/jquery.js': 'jquery.js'})
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any

from conveyor.cdn.errors import InvalidPackageConfig
from conveyor.cdn.git import check_repository
from conveyor.extras import require_extra

NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
# cdnjs's schema writes ``^git|npm$``: anything starting with "git" or ending in "npm" passes it.
SOURCE = re.compile(r"^git|npm$")
OPTIMIZATIONS = ("js", "css", "png", "jpg")
DEFAULT_REGISTRY = "https://registry.npmjs.org"
DEFAULT_CRON = "*/10 * * * *"


def _fail(source: str, field: str, problem: str) -> InvalidPackageConfig:
    return InvalidPackageConfig(f"{source}: {field}: {problem}")


def _object(value: Any, source: str, field: str, required: Iterable[str], optional: Iterable[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(source, field or "(top level)", "must be an object")
    required = tuple(required)
    allowed = set(required) | set(optional)
    prefix = f"{field}." if field else ""
    for key in value:
        if key not in allowed:
            raise _fail(source, prefix + str(key), "is not a field of a package config")
    for key in required:
        if key not in value:
            raise _fail(source, prefix + key, "is required")
    return value


def _string(value: Any, source: str, field: str, pattern: re.Pattern[str] | None = None) -> str:
    if not isinstance(value, str):
        raise _fail(source, field, "must be a string")
    if pattern is not None and not pattern.search(value):
        raise _fail(source, field, f"{value!r} does not match {pattern.pattern}")
    return value


def _strings(value: Any, source: str, field: str, *, at_least: int = 0) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _fail(source, field, "must be an array of strings")
    if len(value) < at_least:
        raise _fail(source, field, f"must have at least {at_least} item(s)")
    return tuple(_string(item, source, f"{field}[{i}]") for i, item in enumerate(value))


def check_glob(pattern: str, source: str, field: str) -> str:
    """Refuse a glob that cdnjs's glob library would not compile (an unclosed ``[`` or ``{``, an
    empty or reversed class, a trailing ``\\``) or that reaches outside ``basePath``."""
    if not pattern:
        raise _fail(source, field, "an empty glob matches nothing")
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise _fail(source, field, f"glob {pattern!r} must stay inside basePath (no leading '/', no '..')")
    braces, i = 0, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            if i + 1 == len(pattern):
                raise _fail(source, field, f"glob {pattern!r} ends with an escape")
            i += 2
            continue
        if char == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "^") else i + 1)
            body = pattern[i + 1 : end].lstrip("!^") if end != -1 else ""
            if end == -1 or not body:
                raise _fail(source, field, f"glob {pattern!r} has an unclosed or empty character class")
            for low, high in re.findall(r"(.)-(.)", body):
                if low > high:
                    raise _fail(source, field, f"glob {pattern!r} has a reversed range {low}-{high}")
            i = end + 1
            continue
        if char == "{":
            braces += 1
        elif char == "}" and braces:
            braces -= 1
        i += 1
    if braces:
        raise _fail(source, field, f"glob {pattern!r} has an unclosed '{{'")
    return pattern


@dataclasses.dataclass(frozen=True)
class FileMapEntry:
    base_path: str
    files: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class FileMap:
    """``autoupdate.fileMap``: which files of a version are published, and where."""

    entries: tuple[FileMapEntry, ...]

    def select(self, paths: Iterable[str]) -> dict[str, str]:
        """``{source path: destination}`` of ``paths`` matched by a glob under its entry's
        ``basePath``; the destination is the path relative to it. The first entry to claim a
        destination keeps it."""
        # wcmatch comes with the [cdn] extra, so the rest of Conveyor imports this module without it.
        require_extra("conveyor.cdn", "cdn", ("wcmatch",))
        from wcmatch import glob

        flags = glob.GLOBSTAR | glob.BRACE
        selected: dict[str, str] = {}
        taken: set[str] = set()
        ordered = sorted(paths)
        for entry in self.entries:
            base = entry.base_path.strip("/")
            base = "" if base in ("", ".") else base
            for path in ordered:
                if base and not path.startswith(base + "/"):
                    continue
                relative = path[len(base) + 1 :] if base else path
                if relative in taken or path in selected:
                    continue
                if glob.globmatch(relative, list(entry.files), flags=flags):
                    selected[path] = relative
                    taken.add(relative)
        return selected

    def stored(self) -> list[dict[str, Any]]:
        return [{"basePath": e.base_path, "files": list(e.files)} for e in self.entries]


@dataclasses.dataclass(frozen=True)
class PackageConfig:
    """One checked package config; ``raw`` is the document as given (stored and shown as is)."""

    name: str
    source: str
    target: str
    file_map: FileMap
    ignore_versions: frozenset[str]
    optimization: Mapping[str, bool]
    raw: Mapping[str, Any]

    @classmethod
    def parse(cls, data: Any, source: str = "config") -> PackageConfig:
        """The checked config of ``data`` (a decoded JSON document); ``source`` names it in errors.
        A path ``.../<letter>/<name>.json`` must agree with the config's name, as cdnjs's checker
        requires."""
        top = _object(
            data,
            source,
            "",
            ("name", "description", "keywords", "repository", "autoupdate"),
            ("filename", "homepage", "license", "authors", "optimization"),
        )
        name = _string(top["name"], source, "name", NAME)
        _string(top["description"], source, "description")
        _strings(top["keywords"], source, "keywords")
        repository = _object(top["repository"], source, "repository", ("type", "url"), ())
        _string(repository["type"], source, "repository.type")
        _string(repository["url"], source, "repository.url")
        for field in ("filename", "homepage", "license"):
            if field in top:
                _string(top[field], source, field)
        if "authors" in top:
            if not isinstance(top["authors"], list):
                raise _fail(source, "authors", "must be an array of objects")
            for i, author in enumerate(top["authors"]):
                field = f"authors[{i}]"
                _object(author, source, field, ("name",), ("email", "url"))
                for key, value in author.items():
                    _string(value, source, f"{field}.{key}")
        optimization: dict[str, bool] = dict.fromkeys(OPTIMIZATIONS, True)
        if "optimization" in top:
            for key, value in _object(top["optimization"], source, "optimization", (), OPTIMIZATIONS).items():
                if not isinstance(value, bool):
                    raise _fail(source, f"optimization.{key}", "must be true or false")
                optimization[key] = value
        # ignoreVersions: accepted as cdnjs's Go struct accepts it (its human schema does not).
        auto = _object(top["autoupdate"], source, "autoupdate", ("source", "target", "fileMap"), ("ignoreVersions",))
        kind = _string(auto["source"], source, "autoupdate.source", SOURCE)
        if kind not in ("npm", "git"):
            raise _fail(source, "autoupdate.source", f"{kind!r}: must be npm or git")
        target = _string(auto["target"], source, "autoupdate.target")
        if not target:
            what = "npm package" if kind == "npm" else "git repository"
            raise _fail(source, "autoupdate.target", f"must name the {what}")
        if kind == "git":  # its form here; a server's egress policy applies when it is added
            check_repository(target, None, field=f"{source}: autoupdate.target")
        ignore = frozenset(_strings(auto.get("ignoreVersions", []), source, "autoupdate.ignoreVersions"))
        if not isinstance(auto["fileMap"], list) or not auto["fileMap"]:
            raise _fail(source, "autoupdate.fileMap", "must be an array of at least 1 entry")
        entries = []
        for i, raw_entry in enumerate(auto["fileMap"]):
            field = f"autoupdate.fileMap[{i}]"
            entry = _object(raw_entry, source, field, ("basePath", "files"), ())
            base = _string(entry["basePath"], source, f"{field}.basePath")
            if base.startswith("/") or ".." in base.split("/"):
                raise _fail(source, f"{field}.basePath", f"{base!r} must be a path inside the package")
            files = _strings(entry["files"], source, f"{field}.files", at_least=1)
            entries.append(
                FileMapEntry(base, tuple(check_glob(p, source, f"{field}.files[{j}]") for j, p in enumerate(files)))
            )
        path = PurePosixPath(source)
        if path.suffix == ".json":
            if path.stem != name:
                raise _fail(source, "name", f"{name!r} must be the file's name ({path.stem}.json)")
            letter = path.parent.name
            if len(letter) == 1 and letter != name[0].lower():
                raise _fail(source, "name", f"{name!r} belongs in packages/{name[0].lower()}/, not {letter}/")
        return cls(name, kind, target, FileMap(tuple(entries)), ignore, optimization, top)


@dataclasses.dataclass(frozen=True)
class CdnSettings:
    """The CDN of an account (``conveyor cdn init``): its buckets, registry, cron, public account."""

    account: str
    primary_bucket: str
    staging_bucket: str
    mirror_bucket: str | None
    registry: str
    cron: str
    public_account: str
    staging_days: int
    created_ms: int
