"""The libraries API in api.cdnjs.com's shapes: ``/libraries``, ``/libraries/:name``,
``/libraries/:name/:version``, ``/whitelist``, ``/stats``, read through :class:`~conveyor.cdn.metadata.Catalog`
(so a version is there only once all of it is published).

Each handler is a plain function of the catalog and the query, returning an :class:`Answer` (status,
JSON document, seconds a client may cache it, immutable or not); ``cdn serve`` sends it with CORS.

>>> answer = library(catalog, "jquery", {"fields": ["version,sri"]})
>>> answer.status, answer.body
(200, {'version': '3.7.1', 'sri': 'sha512-...'})
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from conveyor.cdn.metadata import CATEGORIES, Catalog, whitelisted
from conveyor.cdn.store import SEARCH_FIELDS

LATEST_BASE = "https://cdnjs.cloudflare.com/ajax/libs/"
SIX_HOURS = 6 * 60 * 60
ONE_HOUR = 60 * 60
VERSION_SECONDS = 355 * 24 * 60 * 60  # 30,672,000: as long as the files themselves
MAX_SEARCH_BYTES = 512
# api.cdnjs.com's searchable fields, and the index column each is matched in here (no alternative
# names, GitHub data or maintainers are kept: those match the name and the repository URL).
SEARCH_FIELD_COLUMNS = {
    "name": "name",
    "alternativenames": "name",
    "github.repo": "repository",
    "description": "description",
    "keywords": "keywords",
    "filename": "filename",
    "repositories.url": "repository",
    "github.user": "repository",
    "maintainers.name": "name",
}
MIXED_CASE_FIELDS = {
    "alternativenames": "alternativeNames",
    "filetype": "fileType",
    "originalname": "originalName",
    "objectid": "objectID",
}

Query = Mapping[str, Sequence[str]]
Search = Callable[[str, frozenset[str]], list[str]]


@dataclasses.dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    cache_seconds: int  # -1: no caching
    immutable: bool = False


def not_found(what: str) -> Answer:
    return Answer(404, {"error": True, "status": 404, "message": f"{what} not found"}, ONE_HOUR)


def query_list(query: Query, name: str) -> list[str]:
    """A query parameter's values split on commas and spaces, lower-cased (as api.cdnjs.com)."""
    return [part.strip().lower() for value in query.get(name, ()) for part in value.replace(",", " ").split(" ")]


def _wanted(query: Query, all_by_default: bool = True) -> Callable[[str], bool]:
    values = [v for v in query_list(query, "fields") if v]
    everything = "*" in values or (all_by_default and not values)
    return lambda field: everything or field.lower() in values


def _pick(source: Mapping[str, Any], wanted: Callable[[str], bool]) -> dict[str, Any]:
    return {key: value for key, value in source.items() if wanted(key)}


def _latest(record: Mapping[str, Any]) -> str | None:
    if record.get("filename") and record.get("version"):
        return f"{LATEST_BASE}{record['name']}/{record['version']}/{record['filename']}"
    return None


def _sri_for(name: str, version: str, files: list[str], sris: Mapping[str, str]) -> dict[str, str]:
    return {file: sris[f"{name}/{version}/{file}"] for file in files if f"{name}/{version}/{file}" in sris}


def _search_record(record: Mapping[str, Any], sri: str | None) -> dict[str, Any]:
    """A package as api.cdnjs.com's search index holds it."""
    filename = record.get("filename")
    return {
        "name": record["name"],
        "latest": _latest(record),
        "alternativeNames": [],
        "originalName": record["name"],
        "version": record.get("version"),
        "description": record.get("description"),
        "keywords": record.get("keywords", []),
        "license": record.get("license"),
        "homepage": record.get("homepage"),
        "author": record.get("author"),
        "filename": filename,
        "sri": sri,
        "fileType": filename.rsplit(".", 1)[-1] if isinstance(filename, str) and "." in filename else None,
        "github": None,
        "repository": record.get("repository"),
        "objectID": record["name"],
    }


def libraries(catalog: Catalog, search: Search, query: Query) -> Answer:
    """``GET /libraries``: ``{results: [{name, latest, ...fields}], total, available}``."""
    text = (query.get("search") or [""])[0].encode()[:MAX_SEARCH_BYTES].decode(errors="ignore")
    if text.strip():
        asked = {SEARCH_FIELD_COLUMNS[f] for f in query_list(query, "search_fields") if f in SEARCH_FIELD_COLUMNS}
        names = search(text, frozenset(asked or SEARCH_FIELDS))
    else:
        names = catalog.package_names()
    records = sorted(catalog.packages(names), key=lambda r: r["name"])
    fields = [MIXED_CASE_FIELDS.get(f, f) for f in query_list(query, "fields") if f]
    everything = "*" in fields
    results = []
    for record in records:
        sri = None
        if everything or "sri" in fields:
            sri = _package_sri(catalog, record)
        hit = _search_record(record, sri)
        if everything:
            results.append(hit)
        else:
            results.append({field: hit.get(field) for field in dict.fromkeys(["name", "latest", *fields])})
    limit_text = (query.get("limit") or [""])[0]
    limit = int(limit_text) if limit_text.strip().isdigit() and int(limit_text) > 0 else None
    trimmed = results[:limit] if limit else results
    return Answer(200, {"results": trimmed, "total": len(trimmed), "available": len(results)}, SIX_HOURS)


def _package_sri(catalog: Catalog, record: Mapping[str, Any]) -> str | None:
    name, version, filename = record["name"], record.get("version"), record.get("filename")
    if not version or not filename:
        return None
    return catalog.sris(name, version).get(f"{name}/{version}/{filename}")


def library(catalog: Catalog, name: str, query: Query) -> Answer:
    """``GET /libraries/:name``; ``assets`` holds only the latest version, as api.cdnjs.com's."""
    record = catalog.package(name)
    if record is None:
        return not_found("Library")
    wanted = _wanted(query)
    rest = {k: v for k, v in record.items() if k != "name"}
    body = _pick({"name": record["name"], "latest": _latest(record), "sri": None, **rest}, wanted)
    version, filename = record.get("version"), record.get("filename")
    if wanted("versions"):
        body["versions"] = catalog.versions(name)
    if wanted("assets"):
        if not version:
            body["assets"] = []
        else:
            files = catalog.files(name, version) or []
            body["assets"] = [
                {
                    "version": version,
                    "files": [f for f in files if whitelisted(f)],
                    "rawFiles": files,
                    "sri": _sri_for(name, version, files, catalog.sris(name, version)),
                }
            ]
    if wanted("sri") and version and filename:
        body["sri"] = catalog.sris(name, version).get(f"{name}/{version}/{filename}")
    return Answer(200, body, SIX_HOURS)


def library_version(catalog: Catalog, name: str, version: str, query: Query) -> Answer:
    """``GET /libraries/:name/:version``: ``{name, version, rawFiles, files, sri}``, immutable."""
    record = catalog.package(name)
    if record is None:
        return not_found("Library")
    files = catalog.files(name, version)
    if files is None:
        return not_found("Version")
    wanted = _wanted(query)
    body = _pick(
        {"name": record["name"], "version": version, "rawFiles": files, "files": [f for f in files if whitelisted(f)]},
        wanted,
    )
    if wanted("sri"):
        body["sri"] = _sri_for(name, version, files, catalog.sris(name, version))
    return Answer(200, body, VERSION_SECONDS, immutable=True)


def whitelist(query: Query) -> Answer:
    """``GET /whitelist``: ``{extensions, categories}``."""
    return Answer(
        200, _pick({"extensions": list(CATEGORIES), "categories": dict(CATEGORIES)}, _wanted(query)), SIX_HOURS
    )


def stats(catalog: Catalog, query: Query) -> Answer:
    """``GET /stats``: ``{libraries: count}``."""
    return Answer(200, _pick({"libraries": len(catalog.package_names())}, _wanted(query)), SIX_HOURS)
