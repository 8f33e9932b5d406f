"""Where the storage catalog's rows live: ``storage.db`` in a SQLite deployment, or the tables of
migrations 0008 and 0013 in a PostgreSQL one (:mod:`conveyor.engine.tables`). Both run the same
named queries (``queries.sql``), so the catalog's logic (:mod:`conveyor.storage.catalog`) is
written once."""

from __future__ import annotations

from conveyor.deployment import Deployment
from conveyor.engine.sqlfile import load_queries, load_script
from conveyor.engine.tables import Row, SqliteFile, Tables, Transaction, open_tables

__all__ = ["FILE_NAME", "Database", "Row", "Transaction", "open_catalog_database"]

QUERIES = load_queries("conveyor.storage", "queries.sql")
SQLITE_FILE = SqliteFile(
    "storage.db",
    load_script("conveyor.storage", "storage_sqlite.sql"),
    version=2,
    upgrades={1: load_script("conveyor.storage", "storage_v1_to_v2.sql")},
)
FILE_NAME = SQLITE_FILE.name
Database = Tables


def open_catalog_database(deployment: Deployment) -> Database | None:
    """The catalog's tables on ``deployment``'s engine; None over HTTP."""
    return open_tables(deployment, SQLITE_FILE, QUERIES)
