"""The real PostgreSQL server for tests: started if it is down, one throwaway schema per deployment.

Tests never skip because PostgreSQL is missing: :func:`ensure_server` starts the local cluster, and
fails loudly if it cannot.
"""

from __future__ import annotations

import atexit
import os
import secrets
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import psycopg

import conveyor
from conveyor.engine.postgres import PostgresEngine

SERVER = os.environ.get("CONVEYOR_TEST_PG", "postgresql://127.0.0.1:5432/test")
_started = False
_created: set[str] = set()


def ensure_server(timeout: float = 60.0) -> None:
    """Make sure the local PostgreSQL answers; start its cluster if not."""
    global _started
    if _started:
        return
    try:
        psycopg.connect(SERVER, connect_timeout=3).close()
    except psycopg.OperationalError:
        version = sorted(os.listdir("/etc/postgresql"))[-1]
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start"], check=False, timeout=120
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(SERVER, connect_timeout=3).close()
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    _started = True


def new_schema() -> str:
    return f"cv_test_{secrets.token_hex(6)}"


def schema_url(schema: str) -> str:
    """The server's URL with ``schema`` first on the search path (and as the application name, so a
    test can find its engine's connections in ``pg_stat_activity``)."""
    return f"{SERVER}?application_name={schema}&options={quote(f'-csearch_path={schema}')}"


def drop_schema(schema: str) -> None:
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _drop_created() -> None:
    for schema in sorted(_created):
        drop_schema(schema)


class ThrowawayEngine(PostgresEngine):
    """A PostgreSQL engine in a schema of its own, dropped when the test process exits (not when the
    engine closes: a test may reopen the same deployment)."""

    def __init__(self, schema: str | None = None) -> None:
        ensure_server()
        self.schema = schema or new_schema()
        if not _created:
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
    with psycopg.connect(SERVER, autocommit=True) as conn:
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
