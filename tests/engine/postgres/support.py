"""The real PostgreSQL server for tests (``cluster.py`` finds or starts it), one throwaway schema per
deployment.

Tests never skip because PostgreSQL is missing: without a server and the binaries to start one they
fail, saying what to install.
"""

from __future__ import annotations

import atexit
import secrets
import time
from pathlib import Path
from urllib.parse import quote

import psycopg

import conveyor
from conveyor.engine.postgres import PostgresEngine
from tests.engine.postgres.cluster import server_url

_created: set[str] = set()


def new_schema() -> str:
    return f"cv_test_{secrets.token_hex(6)}"


def schema_url(schema: str) -> str:
    """The server's URL with ``schema`` first on the search path (and as the application name, so a
    test can find its engine's connections in ``pg_stat_activity``)."""
    return f"{server_url()}?application_name={schema}&options={quote(f'-csearch_path={schema}')}"


def drop_schema(schema: str) -> None:
    with psycopg.connect(server_url(), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _drop_created() -> None:
    for schema in sorted(_created):
        drop_schema(schema)


class ThrowawayEngine(PostgresEngine):
    """A PostgreSQL engine in a schema of its own, dropped when the test process exits (not when the
    engine closes: a test may reopen the same deployment)."""

    def __init__(self, schema: str | None = None) -> None:
        self.schema = schema or new_schema()
        if not _created:
            # The server first: atexit runs in reverse, so a throw-away cluster stops after the drops.
            server_url()
            atexit.register(_drop_created)
        _created.add(self.schema)
        super().__init__(schema_url(self.schema))


def fresh_client(tmp: Path | None = None) -> conveyor.Conveyor:
    """A deployment on the real PostgreSQL (the conformance suite's ``postgres`` engine).

    Called twice with the same ``tmp`` directory, it opens the same deployment (the schema's name
    is kept in the directory), as the SQLite engine does with its data directory.
    """
    schema = None
    if tmp is not None:
        marker = tmp / "postgres-schema"
        if marker.exists():
            schema = marker.read_text()
        else:
            schema = new_schema()
            tmp.mkdir(parents=True, exist_ok=True)
            marker.write_text(schema)
    engine = ThrowawayEngine(schema)
    return conveyor.Conveyor(engine, engine.url)


def terminate_connections(schema: str) -> int:
    """Kill every server connection of the engines using ``schema`` (as a network cut would), and
    wait until those backends are gone: pg_terminate_backend only signals them, and a backend still
    exiting holds its advisory locks."""
    with psycopg.connect(server_url(), autocommit=True) as conn:
        # pg_terminate_backend in the select list: in WHERE, the planner may call it on any row.
        pids = [
            pid
            for pid, _ in conn.execute(
                "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                (schema,),
            ).fetchall()
        ]
        deadline = time.monotonic() + 10
        while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)).fetchone()[0]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"backends {pids} did not exit within 10 s of being terminated")
            time.sleep(0.01)
    return len(pids)
