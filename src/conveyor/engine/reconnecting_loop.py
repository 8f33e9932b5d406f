"""A background loop that outlives its connection: the listener, the notifier, the vacuumer and the
coordinator each run one step after another until told to stop, and ride out a database restart or
a network cut by backing off and trying again.

The backoff doubles up to a ceiling, with jitter, so the processes that lost the same server do not
all come back at the same instant. The failure is logged when it begins (and when its error
changes) and its end once, not on every attempt: a server down for a minute is two log lines.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """Pauses after consecutive failures: ``first``, doubling up to ``most``; each taken at random
    between half of that and all of it."""

    first: float
    most: float

    def after(self, failures: int) -> float:
        """The pause after the ``failures``-th failure in a row (1 for the first)."""
        pause = min(self.first * 2 ** min(failures - 1, 32), self.most)
        return random.uniform(pause / 2, pause)


class ReconnectingLoop:
    """Runs ``step`` until ``stop`` is set; ``step`` returns how long to wait before the next run
    (``None``: at once). An error of a ``transient`` type is logged on a change of state, handed to
    ``on_error`` (to drop a broken connection, say), and the step run again after a backoff; any
    other error ends the loop and is raised.

    >>> stop = threading.Event()
    >>> loop = ReconnectingLoop(
    ...     "listening", listen_once, stop=stop, transient=(psycopg.Error,), log=log, backoff=Backoff(0.05, 1.0)
    ... )
    >>> threading.Thread(target=loop.run).start()
    >>> stop.set()   # the loop ends after the step under way, or at once if it is pausing
    """

    def __init__(
        self,
        what: str,
        step: Callable[[], float | None],
        *,
        stop: threading.Event,
        transient: tuple[type[Exception], ...],
        log: logging.Logger,
        backoff: Backoff,
        on_error: Callable[[Exception], None] | None = None,
        start_after: float = 0.0,
    ) -> None:
        self.what = what
        self._step = step
        self._stop = stop
        self._transient = transient
        self._log = log
        self._on_error = on_error
        self._backoff = backoff
        self._start_after = start_after
        self.failures = 0  # in a row, now
        self._error: str | None = None

    def run(self) -> None:
        delay = self._start_after
        while not self._stop.wait(delay):
            try:
                delay = self._step() or 0.0
            except self._transient as exc:
                self.failures += 1
                self._failed(exc)
                if self._on_error is not None:
                    self._on_error(exc)
                delay = self._backoff.after(self.failures)
            else:
                if self.failures:
                    self._log.info("%s works again after %d failed attempts", self.what, self.failures)
                self.failures, self._error = 0, None

    def _failed(self, exc: Exception) -> None:
        error = str(exc).strip() or type(exc).__name__
        if error != self._error:
            self._error = error
            self._log.warning("%s failed (%s); trying again (reported again when this changes)", self.what, error)
