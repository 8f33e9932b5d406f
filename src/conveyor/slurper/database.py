"""Where a deployment's migration jobs live: ``slurper.db`` in a SQLite deployment's directory (a
file of its own, like ``workflows.db``), or the tables of migration 0012 in a PostgreSQL one. Both
run the named queries of ``queries.sql`` (:mod:`conveyor.engine.tool_database`), so the job store's
logic (:mod:`conveyor.slurper.store`) is written once.

>>> db = open_job_database(cv.deployment)
>>> db.transaction(lambda tx: tx.rows("job", {"id": job_id}), "reading a job")
"""

from __future__ import annotations

from conveyor.deployment import Deployment
from conveyor.engine.tool_database import ToolDatabase, ToolTables
from conveyor.slurper.errors import InvalidJob

TABLES = ToolTables("conveyor.slurper", "slurper.db", version=1, what="migration jobs")


def open_job_database(deployment: Deployment) -> ToolDatabase:
    """The job tables of ``deployment``'s engine."""
    if deployment.kind not in ("sqlite", "postgresql"):
        raise InvalidJob(
            "migration jobs are not available through a server connection yet; connect to the "
            "deployment's SQLite or PostgreSQL URL, or use the server's REST API"
        )
    return TABLES.open(deployment)
