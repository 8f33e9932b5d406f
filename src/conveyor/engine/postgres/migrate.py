"""Versioned schema migrations: ``migrations/NNNN_name.sql``, applied in order, each exactly once.

``conveyor_migrations`` records what is applied. Concurrent migrators (many processes connecting to
a new database at once) serialise on an advisory lock, so each file runs once. A database whose
schema is newer than this Conveyor knows is refused rather than written with old assumptions.
"""

from __future__ import annotations

import itertools
import re
from importlib import resources
from typing import Any

import psycopg
from psycopg import sql

from conveyor.engine.postgres.database import connect, with_retries
from conveyor.engine.sqlfile import load_queries
from conveyor.errors import CorruptStorage

MIGRATIONS_PACKAGE = "conveyor.engine.postgres.migrations"
# pg_advisory_xact_lock(LOCK_CLASS, 0) guards migrations; (LOCK_CLASS, 1) is coordinator leadership.
LOCK_CLASS = 0x436F6E76  # 'Conv'
Q = load_queries("conveyor.engine.postgres", "sessions.sql")
_FILE = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def available() -> list[tuple[int, str]]:
    """(version, file name) of every migration this Conveyor ships, in order."""
    files = []
    for entry in resources.files(MIGRATIONS_PACKAGE).iterdir():
        match = _FILE.match(entry.name)
        if match:
            files.append((int(match.group(1)), entry.name))
    files.sort()
    for (version, first), (following, second) in itertools.pairwise(files):
        if version == following:  # two branches took the same number: a build error, not a runtime one
            raise RuntimeError(f"migrations {first} and {second} have the same number {version:04d}")
    return files


def _ensure_schema(conn: psycopg.Connection[tuple[Any, ...]]) -> None:
    """Create the first schema of ``search_path`` if it does not exist (a URL may name a new one)."""
    row = conn.execute(Q["current_schema"]).fetchone()
    if row is not None and row[0] is not None:
        return
    path = conn.execute(Q["search_path"]).fetchone()
    first = str(path[0] if path else "").split(",")[0].strip().strip('"')
    if first and first != "$user":
        conn.execute(sql.SQL(Q["create_schema"]).format(schema=sql.Identifier(first)))


def _apply(conninfo: str) -> list[int]:
    applied: list[int] = []
    with connect(conninfo, autocommit=False) as conn, conn.transaction():
        conn.execute(Q["migration_lock"], {"lock_class": LOCK_CLASS})
        _ensure_schema(conn)
        conn.execute(Q["migrations_table"])
        done = {v for (v,) in conn.execute(Q["applied_migrations"]).fetchall()}
        shipped = available()
        newest = max((v for v, _ in shipped), default=0)
        if done and max(done) > newest:
            raise CorruptStorage(
                f"the database has Conveyor schema version {max(done)}; this Conveyor knows up to {newest}"
            )
        for version, name in shipped:
            if version in done:
                continue
            script = resources.files(MIGRATIONS_PACKAGE).joinpath(name).read_text()
            conn.execute(script.encode())
            conn.execute(Q["record_migration"], {"version": version, "name": name})
            applied.append(version)
    return applied


def migrate(url: str) -> list[int]:
    """Bring the database at ``url`` to the newest schema; returns the versions applied now.

    >>> migrate("postgresql://127.0.0.1/conveyor")
    [1]
    >>> migrate("postgresql://127.0.0.1/conveyor")   # already current
    []
    """
    return with_retries(lambda: _apply(url), "migrate")
