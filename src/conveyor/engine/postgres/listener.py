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

from conveyor.engine.postgres.database import FIRST_PAUSE_SECONDS, MAX_PAUSE_SECONDS, connect
from conveyor.engine.reconnecting_loop import Backoff, ReconnectingLoop
from conveyor.engine.sqlfile import load_queries

Q = load_queries("conveyor.engine.postgres", "sessions.sql")
log = logging.getLogger("conveyor.engine.postgres")

# How long the listening thread waits for notifications before it looks for new channels to LISTEN.
LISTEN_POLL_SECONDS = 0.25
# The notifier sends at most one NOTIFY transaction per this interval; channels asked for meanwhile
# go out together. It bounds the extra transactions sends cost the server, for at most this latency.
NOTIFY_INTERVAL_SECONDS = 0.002
RECONNECT_BACKOFF = Backoff(FIRST_PAUSE_SECONDS, MAX_PAUSE_SECONDS)
Connection = psycopg.Connection[tuple[Any, ...]]


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
        self._listening: set[str] = set()  # kept through a reconnect, to wake their waiters then
        self._conn: Connection | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

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
            while self._versions[channel] == current and not self._stop.is_set():
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
        loop = ReconnectingLoop(
            "listening for notifications",
            self._listen_once,
            stop=self._stop,
            transient=(psycopg.Error,),
            log=log,
            backoff=RECONNECT_BACKOFF,
            on_error=self._disconnect,
        )
        try:
            loop.run()
        finally:
            self._disconnect()

    def _listen_once(self) -> None:
        """LISTEN on the channels newly waited on, then relay notifications for a while."""
        if self._conn is None:
            self._conn = connect(self._conninfo, autocommit=True)
            if self._listening:
                # Reconnected: notifications may have been lost meanwhile, so wake everyone.
                self._bump(self._listening)
            self._listening = set()
        with self._cond:
            new = self._wanted - self._listening
        for channel in sorted(new):
            self._conn.execute(sql.SQL(Q["listen"]).format(channel=sql.Identifier(channel)))
        if new:
            self._listening |= new
            self._bump(new)
        for note in self._conn.notifies(timeout=LISTEN_POLL_SECONDS):
            self._bump([note.channel])

    def _disconnect(self, _error: Exception | None = None) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        self._stop.set()
        with self._cond:
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
        self._sending: list[str] = []
        self._conn: Connection | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._done = threading.Event()  # stopping, and nothing left to send (or no way to send it)

    def notify(self, channel: str) -> None:
        """Notify ``channel`` soon (after the caller's commit, which has already happened)."""
        with self._cond:
            self._pending.add(channel)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="conveyor-notify", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        loop = ReconnectingLoop(
            "sending notifications",
            self._send_pending,
            stop=self._done,
            transient=(psycopg.Error,),
            log=log,
            backoff=RECONNECT_BACKOFF,
            on_error=self._put_back,
        )
        try:
            loop.run()
        finally:
            if self._conn is not None:
                self._conn.close()

    def _send_pending(self) -> float:
        """Wait for channels to notify and send them in one transaction; then a pause, so the
        channels asked for meanwhile go out together in the next."""
        with self._cond:
            while not self._pending and not self._stopping:
                self._cond.wait()
            if not self._pending:
                self._done.set()
                return 0.0
            self._sending, self._pending = sorted(self._pending), set()
        if self._conn is None:
            self._conn = connect(self._conninfo, autocommit=True)
        self._conn.execute(Q["notify"], {"channels": self._sending})
        return NOTIFY_INTERVAL_SECONDS

    def _put_back(self, _error: Exception) -> None:
        """After a failed send: reconnect next time and send those channels again, unless closing."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        with self._cond:
            self._pending.update(self._sending)
            if self._stopping:
                self._done.set()

    def close(self) -> None:
        """Send what is pending, then stop."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
