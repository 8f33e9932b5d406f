"""Keeping queue tables small: the coordinator vacuums shards as their dead rows pile up.

Every message leaves dead row versions behind (its lease is an update, its ack a delete). Left to
autovacuum they are removed only after ``autovacuum_naptime`` (a minute by default), or never where
autovacuum is off; at thousands of messages a second that is millions of dead rows, and the
deliverable-message index scans slow down as they wade through them. So the deployment's coordinator
(whichever engine holds leadership) runs this service: every ``VACUUM_INTERVAL_SECONDS`` it reads
the dead-row counts of its schema's message partitions and counter table, and vacuums those past
``VACUUM_DEAD_ROWS``, which keeps dead rows bounded by about one interval of traffic and lets new
rows reuse the freed space, so the tables stop growing.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import psycopg
from psycopg import sql

from conveyor.engine.postgres.database import connect
from conveyor.engine.reconnecting_loop import Backoff, ReconnectingLoop
from conveyor.engine.sqlfile import load_queries

log = logging.getLogger("conveyor.engine.postgres")

VACUUM_INTERVAL_SECONDS = 2.0
VACUUM_DEAD_ROWS = 20_000
# The counter rows are few but updated on every commit: vacuum them on a lower count.
VACUUM_DEAD_COUNTER_ROWS = 2_000
# After a failure, the next try comes about one interval later, as a round would.
RETRY_BACKOFF = Backoff(VACUUM_INTERVAL_SECONDS, VACUUM_INTERVAL_SECONDS)

Q = load_queries("conveyor.engine.postgres", "sessions.sql")


class Vacuumer:
    """A thread that vacuums the queue tables of one schema while this engine leads."""

    def __init__(self, conninfo: str) -> None:
        self._conninfo = conninfo
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self.vacuums = 0

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="conveyor-vacuum", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        loop = ReconnectingLoop(
            "vacuuming queue tables",
            self._round,
            stop=self._stop,
            transient=(psycopg.Error,),
            log=log,
            backoff=RETRY_BACKOFF,
            on_error=self._disconnect,
            start_after=VACUUM_INTERVAL_SECONDS,
        )
        try:
            loop.run()
        finally:
            self._disconnect()

    def _round(self) -> float:
        if self._conn is None:
            self._conn = connect(self._conninfo, autocommit=True)
        self.vacuum_once(self._conn)
        return VACUUM_INTERVAL_SECONDS

    def _disconnect(self, _error: Exception | None = None) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def vacuum_once(self, conn: psycopg.Connection[tuple[Any, ...]]) -> list[str]:
        """Vacuum every table past its dead-row threshold; returns their names."""
        thresholds = {"messages": VACUUM_DEAD_ROWS, "counters": VACUUM_DEAD_COUNTER_ROWS}
        rows = conn.execute(Q["dead_rows"], thresholds).fetchall()
        done = []
        for table, dead in rows:
            if self._stop.is_set():
                break
            conn.execute(sql.SQL(Q["vacuum"]).format(table=sql.Identifier(table)))
            log.debug("vacuumed %s (%d dead rows)", table, dead)
            self.vacuums += 1
            done.append(str(table))
        return done
