"""Where a deployment's migration jobs live: ``slurper.db`` in a SQLite deployment's directory (a
file of its own, like ``workflows.db``), or the tables of migration 0012 in a PostgreSQL one
(:mod:`conveyor.engine.tables`). Both run the named queries of ``queries.sql``, so the job
store's logic (:mod:`conveyor.slurper.store`) is written once.

>>> db = open_job_database(cv.deployment)
>>> db.transaction(lambda tx: tx.rows("job", {"id": job_id}), "reading a job")
"""

from __future__ import annotations

from conveyor.deployment import Deployment
from conveyor.engine.sqlfile import load_queries, load_script
from conveyor.engine.tables import Row, SqliteFile, Tables, Transaction, open_tables
from conveyor.slurper.errors import InvalidJob

__all__ = ["SQLITE_FILE", "JobDatabase", "Row", "Transaction", "open_job_database"]

QUERIES = load_queries("conveyor.slurper", "queries.sql")
SQLITE_FILE = SqliteFile("slurper.db", load_script("conveyor.slurper", "sqlite_schema.sql"), version=1)
JobDatabase = Tables


def open_job_database(deployment: Deployment) -> JobDatabase:
    """The job tables of ``deployment``'s engine."""
    tables = open_tables(deployment, SQLITE_FILE, QUERIES, pool_size=8)
    if tables is None:
        raise InvalidJob(
            "migration jobs are not available through a server connection yet; connect to the "
            "deployment's SQLite or PostgreSQL URL, or use the server's REST API"
        )
    return tables
