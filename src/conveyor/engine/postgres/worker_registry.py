"""The PostgreSQL worker registry: the ``workers`` table (``migrations/0003_workers.sql``)."""

from __future__ import annotations

from typing import Any

import psycopg

from conveyor.engine.postgres.database import ReadPool
from conveyor.engine.sqlfile import load_queries
from conveyor.engine.worker_rows import EXPIRY_MS, record_parameters, worker_from_row, worker_id_taken
from conveyor.model import WorkerEntry

Q = load_queries("conveyor.engine.postgres", "workers.sql")
Connection = psycopg.Connection[tuple[Any, ...]]


class WorkerRegistry:
    """Records, heartbeats and lists worker processes; every method is one transaction."""

    def __init__(self, pool: ReadPool) -> None:
        self._pool = pool

    def record(self, entry: WorkerEntry, registered_by: str, now_ms: int) -> None:
        args = record_parameters(entry, registered_by, now_ms)

        def fn(conn: Connection) -> None:
            conn.execute(Q["prune"], {"cutoff": now_ms - EXPIRY_MS})
            if not conn.execute(Q["record"], args).rowcount:
                raise worker_id_taken(entry)

        self._pool.transaction(fn, "record worker")

    def remove(self, worker_id: str, registered_by: str) -> None:
        self._pool.transaction(
            lambda c: c.execute(Q["remove"], {"worker": worker_id, "by": registered_by}), "remove worker"
        )

    def list(self, now_ms: int) -> list[WorkerEntry]:
        def fn(conn: Connection) -> list[tuple[Any, ...]]:
            conn.execute(Q["prune"], {"cutoff": now_ms - EXPIRY_MS})
            return conn.execute(Q["list"], {"cutoff": now_ms - EXPIRY_MS}).fetchall()

        return [worker_from_row(row) for row in self._pool.transaction(fn, "list workers")]
