"""Waking idle consumers with LISTEN/NOTIFY instead of polling the database.

Every commit that makes messages deliverable (a send, a retry, a release, a dead-letter move) is
followed by a ``pg_notify`` on the queue's channel, sent by a :class:`Notifier`. One thread per
engine holds a dedicated connection that LISTENs on the channels of the queues being waited on and
turns each notification into a bump of that channel's version; :meth:`Listener.wait` sleeps on a
condition variable until its channel's version moves. The thread wakes a few times a second only
to take new LISTENs; the database sees no queries while nothing happens.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from typing import Any

import psycopg
from psycopg import sql

from conveyor.engine.postgres.database import MAX_PAUSE_SECONDS, connect

log = logging.getLogger("conveyor.engine.postgres")

# How long the listening thread waits for notifications before it looks for new channels to LISTEN.
LISTEN_POLL_SECONDS = 0.25
# The notifier sends at most one NOTIFY transaction per this interval; channels asked for meanwhile
# go out together. It bounds the extra transactions sends cost the server, for at most this latency.
NOTIFY_INTERVAL_SECONDS = 0.002


def channel_of(queue_id: str) -> str:
    """The notification channel of a queue."""
    return f"conveyor_{queue_id}"


class Listener:
    """Blocks callers until a queue's channel is notified.

    >>> listener = Listener(conninfo)
    >>> listener.wait(channel_of(queue_id), timeout=5.0)   # returns early on a notification
    """

    def __init__(self, conninfo: str) -> None:
        self._conninfo = conninfo
        self._cond = threading.Condition()
        self._versions: dict[str, int] = defaultdict(int)
        self._seen: dict[str, int] = {}
        self._wanted: set[str] = set()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def wait(self, channel: str, timeout: float) -> None:
        """Return when ``channel`` was notified since the last wait on it, or after ``timeout`` s.

        The first wait on a channel returns as soon as the LISTEN is in place: anything sent before
        could not be heard, so the caller should look again.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            if channel not in self._wanted:
                self._wanted.add(channel)
                self._start()
            current = self._versions[channel]
            if self._seen.get(channel) != current:
                self._seen[channel] = current
                if current:
                    return
            while self._versions[channel] == current and not self._stopping:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            self._seen[channel] = self._versions[channel]

    def wake(self, channel: str) -> None:
        """Make waits on ``channel`` in this process return now, and the next one at once if none
        is waiting yet (so a wake just before a wait is not lost)."""
        self._bump([channel])

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="conveyor-listen", daemon=True)
            self._thread.start()

    def _bump(self, channels: set[str] | list[str]) -> None:
        with self._cond:
            for channel in channels:
                self._versions[channel] += 1
            self._cond.notify_all()

    def _run(self) -> None:
        conn: psycopg.Connection[tuple[Any, ...]] | None = None
        listening: set[str] = set()
        pause = 0.05
        while not self._stopping:
            try:
                if conn is None:
                    conn = connect(self._conninfo, autocommit=True)
                    if listening:
                        # Reconnected: notifications may have been lost meanwhile, so wake everyone.
                        self._bump(listening)
                    listening = set()
                with self._cond:
                    new = self._wanted - listening
                for channel in sorted(new):
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                if new:
                    listening |= new
                    self._bump(new)
                for note in conn.notifies(timeout=LISTEN_POLL_SECONDS):
                    self._bump([note.channel])
                pause = 0.05
            except psycopg.Error as exc:
                log.warning("listening for notifications failed (%s); reconnecting", exc)
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(pause)
                pause = min(pause * 2, MAX_PAUSE_SECONDS)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()


class Notifier:
    """Sends the NOTIFYs that follow commits, coalesced, from a connection of its own.

    Not from inside the write transactions: PostgreSQL serialises the commits of all transactions
    that NOTIFY behind one database-wide lock, held through their WAL flush, which would undo group
    commit across connections and processes. A NOTIFY-only transaction writes no WAL, so holding
    that lock costs microseconds. Channels asked for while one NOTIFY is in flight, or within
    ``NOTIFY_INTERVAL_SECONDS`` of it, go out together in the next.
    """

    def __init__(self, conninfo: str) -> None:
        self._conninfo = conninfo
        self._cond = threading.Condition()
        self._pending: set[str] = set()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def notify(self, channel: str) -> None:
        """Notify ``channel`` soon (after the caller's commit, which has already happened)."""
        with self._cond:
            self._pending.add(channel)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="conveyor-notify", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        conn: psycopg.Connection[tuple[Any, ...]] | None = None
        pause = 0.05
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait()
                if not self._pending:
                    break
                channels, self._pending = sorted(self._pending), set()
            try:
                if conn is None:
                    conn = connect(self._conninfo, autocommit=True)
                conn.execute("SELECT pg_notify(c, '') FROM unnest(%s::text[]) AS c", (channels,))
                pause = 0.05
                time.sleep(NOTIFY_INTERVAL_SECONDS)
            except psycopg.Error as exc:
                log.warning("sending notifications failed (%s); retrying", exc)
                if conn is not None:
                    conn.close()
                conn = None
                with self._cond:
                    self._pending.update(channels)
                if self._stopping:
                    break
                time.sleep(pause)
                pause = min(pause * 2, MAX_PAUSE_SECONDS)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Send what is pending, then stop."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
