"""The dashboard's CDN (:mod:`conveyor.cdn`), for an account that made one (``conveyor cdn init``):
its packages (a name filter and the CDN's own search), a package's versions with their publish
state, a version's files with their SRI, and the last audit's counts.

A package is one the CDN is configured with (``cdn add``), one with a published version (the KV
catalog readers see, where ``cdn import`` puts what it imports), or both. A version is
*published* once the catalog lists it (the gate every reader passes), *failed* when the pipeline
failed it (with why), and *in progress* while the pipeline has it (queued, downloaded, processed).

Audits are not stored but for their counts (``CdnStore.record_audit``, what ``cdn serve``'s
``/metrics`` shows): the page shows those, and there is no "audit now" button — an audit reads
every published object from the primary and the mirror, which is ``conveyor cdn audit``'s work
and no request's."""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from conveyor.cdn.config import NAME
from conveyor.cdn.errors import CdnNotInitialized, PackageNotFound
from conveyor.cdn.metadata import METADATA_NAMESPACE, Catalog, sort_versions
from conveyor.cdn.store import CdnStore, VersionRow
from conveyor.client.sync import Conveyor
from conveyor.server.dash import views
from conveyor.server.dash.pages import Visit, client_of, dashboard, offset_of, page, render, tools
from conveyor.server.service import blocking
from conveyor.storage.kv_errors import KVNamespaceNotFound

PACKAGES_PAGE = 100
SEARCH_CHARS = 200
_VERSION = re.compile(r"[0-9A-Za-z.+_~-]{1,256}")


@dataclasses.dataclass(frozen=True, slots=True)
class PackageRow:
    name: str
    description: str
    source: str  # npm, git, or "import" for a package only the catalog has
    latest: str  # the newest published version, or ""


@dataclasses.dataclass(frozen=True, slots=True)
class VersionLine:
    version: str
    state: str  # published, in progress, failed
    stage: str  # the pipeline's state (queued, downloaded, processed, failed), or "" for an import
    error: str
    updated_ms: int | None


@dataclasses.dataclass(frozen=True, slots=True)
class FileLine:
    dest: str
    size: int | None
    sri: str | None
    minified_from: str | None
    tool: str


@dataclasses.dataclass(frozen=True, slots=True)
class CdnView:
    account: str
    client: Conveyor
    store: CdnStore
    catalog: Catalog | None  # None until something is published (its KV namespace is made then)

    def published_names(self) -> list[str]:
        return self.catalog.package_names() if self.catalog is not None else []

    def published_versions(self, name: str) -> list[str]:
        return self.catalog.versions(name) if self.catalog is not None else []


def _cdn(request: Request, visit: Visit) -> CdnView:
    account, client = client_of(request, visit)
    store = dashboard(request).cdn()
    if not visit.session.whole_account or store is None:
        raise CdnNotInitialized(f"account {account!r} has no CDN here")
    store.settings(account)  # CdnNotInitialized: a 404 page
    try:
        catalog: Catalog | None = Catalog(client.kv(METADATA_NAMESPACE))
    except KVNamespaceNotFound:
        catalog = None
    return CdnView(account, client, store, catalog)


def _packages(request: Request, visit: Visit) -> dict[str, Any]:
    cdn = _cdn(request, visit)
    configured = {c.name: c for c in cdn.store.packages(cdn.account)}
    names = sorted(set(configured) | set(cdn.published_names()))
    wanted = request.query_params.get("q", "").strip()[:SEARCH_CHARS]
    if wanted:
        found = set(cdn.store.search(cdn.account, wanted))
        names = [n for n in names if wanted.lower() in n.lower() or n in found]
    offset = offset_of(request)
    shown = names[offset : offset + PACKAGES_PAGE]
    records = {r.get("name"): r for r in cdn.catalog.packages(shown)} if cdn.catalog is not None and shown else {}
    rows = []
    for name in shown:
        record, config = records.get(name, {}), configured.get(name)
        description = str(record.get("description") or (config.raw.get("description", "") if config else ""))
        source = config.source if config else "import"
        rows.append(PackageRow(name, description, source, str(record.get("version", ""))))
    return {
        "account": cdn.account,
        "visit": visit,
        "rows": rows,
        "q": wanted,
        "total": len(names),
        "offset": offset,
        "more": offset + PACKAGES_PAGE < len(names),
        "page_size": PACKAGES_PAGE,
    }


@page
async def cdn_page(request: Request, visit: Visit) -> Response:
    def build() -> dict[str, Any]:
        found = _packages(request, visit)
        account = found["account"]
        store = dashboard(request).cdn()
        assert store is not None
        settings = store.settings(account)
        packages, states = store.counts(account)
        audit = store.audit_counts(account)
        return {
            **found,
            "settings": settings,
            "configured": packages,
            "states": states,
            "audit": audit,
            "audit_at": max((row[3] for row in audit), default=None),
            "divergent": sum(row[2] for row in audit if row[1] not in ("ok", "repaired")),
            "when": _when,
            "tools": tools(request, account, visit),
        }

    return render("cdn.html", **await blocking(build))


@page
async def cdn_rows(request: Request, visit: Visit) -> Response:
    return render("_cdn_rows.html", **await blocking(_packages, request, visit))


def _name(request: Request) -> str:
    name = request.path_params["name"]
    if not NAME.fullmatch(name):
        raise PackageNotFound(f"no package {name!r} in the CDN")
    return str(name)


def _versions(cdn: CdnView, name: str) -> list[VersionLine]:
    rows = {r.version: r for r in cdn.store.versions(cdn.account, name)}
    published = set(cdn.published_versions(name))
    if not rows and not published:
        raise PackageNotFound(f"no package {name!r} in the CDN")
    return [_line(v, rows.get(v), v in published) for v in sort_versions(set(rows) | published)]


def _line(version: str, row: VersionRow | None, published: bool) -> VersionLine:
    if row is None:
        return VersionLine(version, "published", "", "", None)
    if published or row.published_ms is not None:
        state = "published"
    elif row.state == "failed":
        state = "failed"
    else:
        state = "in progress"
    return VersionLine(version, state, row.state, row.error or "", row.updated_ms)


@page
async def package_page(request: Request, visit: Visit) -> Response:
    def build() -> dict[str, Any]:
        cdn = _cdn(request, visit)
        name = _name(request)
        try:
            config = cdn.store.package(cdn.account, name)
        except PackageNotFound:
            config = None
        versions = _versions(cdn, name)
        record = cdn.catalog.package(name) if cdn.catalog is not None else None
        return {
            "account": cdn.account,
            "visit": visit,
            "package": name,
            "config": config,
            "record": record or {},
            "versions": versions,
            "counts": {s: sum(1 for v in versions if v.state == s) for s in ("published", "in progress", "failed")},
            "when": _when,
            "tools": tools(request, cdn.account, visit),
        }

    return render("cdn_package.html", **await blocking(build))


@page
async def version_page(request: Request, visit: Visit) -> Response:
    def build() -> dict[str, Any]:
        cdn = _cdn(request, visit)
        name, version = _name(request), request.path_params["version"]
        lines = {v.version: v for v in _versions(cdn, name)} if _VERSION.fullmatch(version) else {}
        if version not in lines:
            raise PackageNotFound(f"package {name!r} has no version {version!r} in the CDN")
        row = cdn.store.version(cdn.account, name, version)
        return {
            "account": cdn.account,
            "visit": visit,
            "package": name,
            "line": lines[version],
            "row": row,
            "files": _files(cdn, name, version),
            "size": views.size,
            "when": _when,
            "tools": tools(request, cdn.account, visit),
        }

    return render("cdn_version.html", **await blocking(build))


def _files(cdn: CdnView, name: str, version: str) -> list[FileLine]:
    """What the pipeline recorded of a version's files, or for an imported version the catalog's."""
    processed = cdn.store.files(cdn.account, name, version)
    if processed:
        return [
            FileLine(f.dest, f.size, f.sri, f.source, f"{f.tool} {f.tool_version}" if f.tool else "") for f in processed
        ]
    if cdn.catalog is None:
        return []
    sris = cdn.catalog.sris(name, version)
    objects = cdn.catalog.objects(name, version)
    return [
        FileLine(f, int(objects[f][0]) if f in objects else None, sris.get(f"{name}/{version}/{f}"), None, "")
        for f in cdn.catalog.files(name, version) or []
    ]


def _when(ms: int | None) -> str:
    return "" if ms is None else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))
