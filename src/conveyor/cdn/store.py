"""``CdnStore``: the only code that writes the package CDN's tables — ``cdn.db`` in a SQLite
deployment's directory, the tables of migrations 0016-0017 in a PostgreSQL one; both run the named
queries of ``queries.sql``.

>>> store = CdnStore.open(cv.deployment)
>>> store.queue_version("local", "jquery", "3.7.1", dist, now_ms=...)
True
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import orjson

from conveyor.cdn.config import CdnSettings, PackageConfig
from conveyor.cdn.errors import CdnNotInitialized, CdnUnavailable, PackageNotFound
from conveyor.cdn.registry import Dist
from conveyor.deployment import Deployment
from conveyor.engine.sqlfile import load_queries, load_script
from conveyor.engine.tables import Row, SqliteFile, Tables, Transaction, open_tables

QUERIES = load_queries("conveyor.cdn", "queries.sql")
SEARCH_FIELDS = ("name", "description", "keywords", "filename", "repository")
_NOT_WORD = re.compile(r"[^0-9a-z]+")


def search_text(text: str) -> str:
    """``text`` as the search index keeps it: lower-case words of letters and digits."""
    return " ".join(_NOT_WORD.sub(" ", text.lower()).split())


SQLITE_FILE = SqliteFile(
    "cdn.db",
    load_script("conveyor.cdn", "sqlite_schema.sql"),
    version=3,
    upgrades={
        1: load_script("conveyor.cdn", "sqlite_v1_to_v2.sql"),
        2: load_script("conveyor.cdn", "sqlite_v2_to_v3.sql"),
    },
)


@dataclasses.dataclass(frozen=True)
class VersionRow:
    """A version the update check found. ``state``: ``queued``, ``downloaded`` (its selected
    ``files`` recorded), ``processed`` (every file through ProcessingWorkflow) or ``failed``
    (``error`` says why); ``published_ms`` is set by publishing."""

    name: str
    version: str
    state: str
    tarball: str
    integrity: str | None
    error: str | None
    files: list[dict[str, Any]]
    skipped: list[str]
    queued_ms: int
    updated_ms: int
    published_ms: int | None


@dataclasses.dataclass(frozen=True)
class ProcessedFile:
    """An output file ProcessingWorkflow left in staging (with its ``.br`` and ``.gz`` unless it is
    ``.woff2``): ``sha512`` in hex; ``sri`` only for ``.js`` and ``.css``. A minified output names
    its original (``source``) and the ``tool`` and ``tool_version`` that made it; an original has
    no ``source``, and a ``tool`` only when it is an image the optimiser rewrote in place."""

    dest: str
    size: int
    sha512: str
    sri: str | None
    source: str | None = None
    tool: str | None = None
    tool_version: str | None = None


def _version(row: Row) -> VersionRow:
    return VersionRow(
        name=row[0],
        version=row[1],
        state=row[2],
        tarball=row[3],
        integrity=row[4],
        error=row[5],
        files=orjson.loads(row[6]) if row[6] else [],
        skipped=orjson.loads(row[7]) if row[7] else [],
        queued_ms=int(row[8]),
        updated_ms=int(row[9]),
        published_ms=None if row[10] is None else int(row[10]),
    )


class CdnStore:
    def __init__(self, tables: Tables, engine: str = "sqlite") -> None:
        self.tables = tables
        self.engine = engine

    @classmethod
    def open(cls, deployment: Deployment) -> CdnStore:
        tables = open_tables(deployment, SQLITE_FILE, QUERIES)
        if tables is None:
            raise CdnUnavailable(
                "the package CDN is not available through a server connection yet; connect to the "
                "deployment's SQLite or PostgreSQL URL"
            )
        return cls(tables, "sqlite" if deployment.kind == "sqlite" else "postgres")

    def close(self) -> None:
        self.tables.close()

    # -- settings -----------------------------------------------------------------------------
    def create_settings(self, settings: CdnSettings) -> bool:
        """Record the account's CDN; False (nothing changed) if it has one already."""

        def create(tx: Transaction) -> bool:
            if tx.one("settings", {"account": settings.account}) is not None:
                return False
            tx.run("insert_settings", dataclasses.asdict(settings))
            return True

        return self.tables.transaction(create, "recording the CDN's settings")

    def settings(self, account: str) -> CdnSettings:
        row = self.tables.read(lambda tx: tx.one("settings", {"account": account}), "reading the CDN's settings")
        if row is None:
            raise CdnNotInitialized(f"account {account!r} has no CDN: run `conveyor cdn init` first")
        return CdnSettings(
            account=row[0],
            primary_bucket=row[1],
            staging_bucket=row[2],
            mirror_bucket=row[3],
            registry=row[4],
            cron=row[5],
            public_account=row[6],
            staging_days=int(row[7]),
            created_ms=int(row[8]),
        )

    # -- packages -----------------------------------------------------------------------------
    def put_package(self, account: str, config: PackageConfig, *, now_ms: int) -> None:
        document = orjson.dumps(dict(config.raw)).decode()
        self.tables.transaction(
            lambda tx: tx.run(
                "upsert_package", {"account": account, "name": config.name, "config": document, "now": now_ms}
            ),
            "recording a package config",
        )

    def package(self, account: str, name: str) -> PackageConfig:
        row = self.tables.read(lambda tx: tx.one("package", {"account": account, "name": name}), "reading a package")
        if row is None:
            raise PackageNotFound(f"no package {name!r} in the CDN: add its config with `conveyor cdn add`")
        return PackageConfig.parse(orjson.loads(row[1]), source=f"stored config of {name}")

    def packages(self, account: str) -> list[PackageConfig]:
        rows = self.tables.read(lambda tx: tx.rows("packages", {"account": account}), "listing packages")
        return [PackageConfig.parse(orjson.loads(config), source=f"stored config of {name}") for name, config in rows]

    # -- versions -----------------------------------------------------------------------------
    def known_versions(self, account: str, name: str) -> list[str]:
        rows = self.tables.read(
            lambda tx: tx.rows("version_names", {"account": account, "name": name}), "reading versions"
        )
        return [row[0] for row in rows]

    def queue_version(self, account: str, name: str, version: str, dist: Dist, *, now_ms: int) -> bool:
        """Record a new version as queued; False if it was recorded before."""
        params = {
            "account": account,
            "name": name,
            "version": version,
            "tarball": dist.tarball,
            "integrity": dist.integrity or (f"sha1:{dist.shasum}" if dist.shasum else None),
            "now": now_ms,
        }
        return self.tables.transaction(lambda tx: tx.run("insert_version", params), "queuing a version") == 1

    def version(self, account: str, name: str, version: str) -> VersionRow | None:
        params = {"account": account, "name": name, "version": version}
        row = self.tables.read(lambda tx: tx.one("version", params), "reading a version")
        return None if row is None else _version(row)

    def versions(self, account: str, name: str) -> list[VersionRow]:
        rows = self.tables.read(lambda tx: tx.rows("versions", {"account": account, "name": name}), "reading versions")
        return [_version(row) for row in rows]

    def record_files(
        self, account: str, name: str, version: str, files: list[dict[str, Any]], skipped: list[str], *, now_ms: int
    ) -> None:
        params = {
            "account": account,
            "name": name,
            "version": version,
            "files": orjson.dumps(files).decode(),
            "skipped": orjson.dumps(skipped).decode(),
            "now": now_ms,
        }
        self.tables.transaction(lambda tx: tx.run("record_files", params), "recording a version's files")

    def record_failure(self, account: str, name: str, version: str, error: str, *, now_ms: int) -> None:
        params = {"account": account, "name": name, "version": version, "error": error, "now": now_ms}
        self.tables.transaction(lambda tx: tx.run("record_failure", params), "recording a failed version")

    def counts(self, account: str) -> tuple[int, dict[str, int]]:
        """How many packages the account's CDN has, and its versions by state."""

        def read(tx: Transaction) -> tuple[int, dict[str, int]]:
            packages = tx.one("package_count", {"account": account})
            states = {state: int(count) for state, count in tx.rows("state_counts", {"account": account})}
            return (int(packages[0]) if packages else 0, states)

        return self.tables.transaction(read, "counting the CDN's versions")

    # -- files ----------------------------------------------------------------------------------
    def record_outputs(self, account: str, name: str, version: str, files: list[ProcessedFile], *, now_ms: int) -> None:
        """Record the output files of one ProcessingWorkflow (an original and its minified twin)
        together, each once (a retried step records nothing new)."""
        key = {"account": account, "name": name, "version": version, "now": now_ms}

        def record(tx: Transaction) -> None:
            for output in files:
                tx.run("insert_file", {**key, **dataclasses.asdict(output)})

        self.tables.transaction(record, "recording processed files")

    def files(self, account: str, name: str, version: str) -> list[ProcessedFile]:
        """Every output file of a version (originals and minified twins), by ``dest``."""
        params = {"account": account, "name": name, "version": version}
        rows = self.tables.read(lambda tx: tx.rows("files", params), "reading a version's files")
        return [ProcessedFile(row[0], int(row[1]), row[2], row[3], row[4], row[5], row[6]) for row in rows]

    def mark_processed(self, account: str, name: str, version: str, *, now_ms: int) -> None:
        params = {"account": account, "name": name, "version": version, "now": now_ms}
        self.tables.transaction(lambda tx: tx.run("mark_processed", params), "marking a version processed")

    # -- publishing -----------------------------------------------------------------------------
    def mark_published(self, account: str, name: str, version: str, *, now_ms: int) -> None:
        """The version is published (its first publication time is kept)."""
        params = {"account": account, "name": name, "version": version, "now": now_ms}
        self.tables.transaction(lambda tx: tx.run("mark_published", params), "marking a version published")

    def index_package(self, account: str, name: str, fields: dict[str, str]) -> None:
        """Put package ``name`` in the search index with ``fields`` (``name``, ``description``,
        ``keywords``, ``filename``, ``repository``), replacing what it had."""
        params = {"account": account, "name": name, **{f"t_{f}": search_text(fields.get(f, "")) for f in SEARCH_FIELDS}}

        def index(tx: Transaction) -> None:
            tx.run("delete_search_entry", {"account": account, "name": name})
            tx.run("insert_search_entry", params)

        self.tables.transaction(index, "indexing a package for search")

    def search(self, account: str, query: str, fields: frozenset[str] = frozenset(SEARCH_FIELDS)) -> list[str]:
        """The names of the indexed packages matching every word of ``query`` as a prefix, in any
        of ``fields``, in name order."""
        words = search_text(query).split()
        if not words or not fields:
            return []
        if self.engine == "sqlite":
            columns = " ".join(f"t_{f}" for f in SEARCH_FIELDS if f in fields)
            match = "{" + columns + "} : (" + " AND ".join(f'"{w}"*' for w in words) + ")"
            params: dict[str, Any] = {"account": account, "query": match}
            rows = self.tables.read(lambda tx: tx.rows("search_sqlite", params), "searching packages")
        else:
            params = {"account": account, "query": " & ".join(f"{w}:*" for w in words)}
            params.update({f"f_{f}": f in fields for f in SEARCH_FIELDS})
            rows = self.tables.read(lambda tx: tx.rows("search_postgres", params), "searching packages")
        return [row[0] for row in rows]

    def record_audit(self, account: str, counts: dict[tuple[str, str], int], *, now_ms: int) -> None:
        """Replace the account's audit counts: ``{(bucket, outcome): count}``."""

        def record(tx: Transaction) -> None:
            tx.run("delete_audit_counts", {"account": account})
            for (bucket, outcome), count in sorted(counts.items()):
                tx.run(
                    "insert_audit_count",
                    {"account": account, "bucket": bucket, "outcome": outcome, "count": count, "now": now_ms},
                )

        self.tables.transaction(record, "recording an audit")

    def audit_counts(self, account: str) -> list[tuple[str, str, int, int]]:
        """The last audit's ``(bucket, outcome, count, audited_ms)`` rows."""
        rows = self.tables.read(lambda tx: tx.rows("audit_counts", {"account": account}), "reading audit counts")
        return [(row[0], row[1], int(row[2]), int(row[3])) for row in rows]
