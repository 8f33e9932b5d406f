"""The ``tokens`` table of each engine's catalog, and the store of the deployment an engine serves.

SQLite: a table of ``catalog.db``, made by the first token store to open the catalog (so an
existing deployment gains it in place). PostgreSQL: a table of the deployment's schema (migration
``0004_tokens.sql``). Either way every server of the deployment sees the same tokens. A server of
an older Conveyor kept them in ``tokens.db`` beside the catalog: that file is imported on first open
and kept aside (``tokens.db.imported``).

>>> store = open_token_store(connect("sqlite:///var/lib/conveyor").engine)
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from conveyor.engine.base import Engine
from conveyor.engine.sqlfile import load_queries
from conveyor.engine.sqlite import SQLiteEngine
from conveyor.engine.sqlite.storage import translate_error
from conveyor.errors import InvalidRequest, StorageError
from conveyor.server.accounts import AccountEngine
from conveyor.server.tokens import Token, TokenStore, token_from_row

T = TypeVar("T")
log = logging.getLogger("conveyor.server")

SQLITE = load_queries("conveyor.server", "tokens_sqlite.sql")
POSTGRES = load_queries("conveyor.server", "tokens_postgres.sql")
LEGACY_FILE = "tokens.db"

NOT_A_DEPLOYMENT = (
    "tokens live in the deployment's catalog, and {url} is a server, not a deployment: run "
    "`conveyor --url sqlite:///DIR tokens ...` (or --url postgresql://...) where the deployment is"
)


class SqliteTokens:
    """The ``tokens`` table of a SQLite deployment's ``catalog.db``."""

    def __init__(self, catalog: Path) -> None:
        self.path = catalog
        self._lock = threading.Lock()
        try:
            self._conn = sqlite3.connect(catalog, isolation_level=None, check_same_thread=False, timeout=60.0)
        except sqlite3.Error as exc:
            raise translate_error(exc, str(catalog)) from None
        self._run(lambda c: c.execute(SQLITE["create_table"]))

    def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            try:
                return fn(self._conn)
            except sqlite3.Error as exc:
                raise translate_error(exc, str(self.path)) from None

    def insert(self, row: Mapping[str, Any]) -> None:
        self._run(lambda c: c.execute(SQLITE["insert"], dict(row)))

    def find(self, hash: str) -> Token | None:
        row = self._run(lambda c: c.execute(SQLITE["find"], {"hash": hash}).fetchone())
        return None if row is None else token_from_row(row)

    def all(self) -> list[Token]:
        return [token_from_row(r) for r in self._run(lambda c: c.execute(SQLITE["all"]).fetchall())]

    def delete(self, token_id: str) -> bool:
        return self._run(lambda c: c.execute(SQLITE["delete"], {"token_id": token_id}).rowcount) > 0

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class PostgresTokens:
    """The ``tokens`` table of a PostgreSQL deployment (its engine has applied the migrations)."""

    def __init__(self, url: str) -> None:
        from conveyor.engine.postgres.database import ReadPool

        self._pool = ReadPool(url, max_size=2)

    def insert(self, row: Mapping[str, Any]) -> None:
        self._pool.run(lambda c: c.execute(POSTGRES["insert"], dict(row)), "store a token")

    def find(self, hash: str) -> Token | None:
        row = self._pool.run(lambda c: c.execute(POSTGRES["find"], {"hash": hash}).fetchone(), "verify a token")
        return None if row is None else token_from_row(row)

    def all(self) -> list[Token]:
        rows = self._pool.run(lambda c: c.execute(POSTGRES["all"]).fetchall(), "list tokens")
        return [token_from_row(r) for r in rows]

    def delete(self, token_id: str) -> bool:
        count = self._pool.run(lambda c: c.execute(POSTGRES["delete"], {"token_id": token_id}).rowcount, "revoke")
        return count > 0

    def close(self) -> None:
        self._pool.close()


def _postgres_url(engine: Engine) -> str | None:
    try:
        from conveyor.engine.postgres import PostgresEngine
    except ImportError:  # without the [postgres] extra there is no PostgreSQL engine either
        return None
    return engine.url if isinstance(engine, PostgresEngine) else None


def open_token_store(engine: Engine, legacy: Path | None = None) -> TokenStore:
    """The token store of the deployment ``engine`` serves. ``legacy``: an older Conveyor's tokens
    file to import (by default ``tokens.db`` in a SQLite deployment's directory, if it is there);
    given, it must exist or have been imported already (``NAME.imported`` beside it)."""
    while isinstance(engine, AccountEngine):
        engine = engine.inner
    if legacy is not None and not legacy.exists() and not legacy.with_name(legacy.name + ".imported").exists():
        raise StorageError(f"there is no tokens file {legacy} to import")
    if isinstance(engine, SQLiteEngine):
        store = TokenStore(SqliteTokens(engine.catalog.path))
        legacy = legacy or engine.directory / LEGACY_FILE
    elif (url := _postgres_url(engine)) is not None:
        store = TokenStore(PostgresTokens(url))
    else:
        raise InvalidRequest(NOT_A_DEPLOYMENT.format(url=getattr(engine, "url", "this URL")))
    if legacy is not None and legacy.exists():
        try:
            count = store.import_file(legacy)
        except BaseException:
            store.close()
            raise
        log.info(
            "imported %d tokens from %s into the deployment's catalog; the file is kept aside beside it", count, legacy
        )
    return store
