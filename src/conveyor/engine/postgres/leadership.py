"""Coordinator leadership on PostgreSQL: a session advisory lock held on a dedicated connection.

The lock is keyed by schema, so deployments sharing a database elect separately. If the connection
is lost (the server restarted, the process died), the lock goes with it and is contested anew: the
coordinator asks every round, so a former leader notices and stops.
"""

from __future__ import annotations

import contextlib
import logging
import threading

import psycopg

from conveyor.engine.postgres.database import connect
from conveyor.engine.postgres.group_commit import Connection
from conveyor.engine.postgres.migrate import LOCK_CLASS
from conveyor.engine.sqlfile import load_queries

Q = load_queries("conveyor.engine.postgres", "sessions.sql")

log = logging.getLogger("conveyor.engine")


class AdvisoryLeadership:
    """``acquire()`` (without blocking) and ``release()`` the deployment's leadership lock."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    def acquire(self) -> bool:
        """True if this process holds leadership (still, or newly)."""
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.execute(Q["still_connected"])
                    return True
                except psycopg.Error:
                    self._conn.close()
                    self._conn = None
            try:
                conn = connect(self.url, autocommit=True)
                row = conn.execute(Q["try_leadership"], {"lock_class": LOCK_CLASS + 1}).fetchone()
            except psycopg.Error as exc:
                log.warning("could not contest coordinator leadership: %s", exc)
                return False
            if not row or not row[0]:
                conn.close()
                return False
            self._conn = conn
            return True

    def release(self) -> None:
        with self._lock:
            if self._conn is not None:
                # Unlocked before closing: the server drops a closed session's locks only once its
                # backend has exited, so a contender asking at once could still be refused.
                with contextlib.suppress(psycopg.Error):  # a lost connection holds no lock
                    self._conn.execute(Q["give_up_leadership"], {"lock_class": LOCK_CLASS + 1})
                self._conn.close()
                self._conn = None
