"""How many batches of one consumer run at once.

Conveyor scales to the backlog at once: while messages are deliverable and fewer than ``allowed``
batches run, the dispatcher starts another batch — it never waits for a batch to finish before
growing. ``allowed`` starts at the cap (``max_concurrency``, or 250 when automatic). A handler that
raises halves ``allowed`` (down to 1); a batch that succeeds doubles it back toward the cap. Explicit
``retry()`` calls are the handler's decision, not failures, so they change nothing.

**Fitted to what more batches at once bring.** Handlers that wait (on a service, a disk, a database)
finish more batches a second the more of them run, up to the cap. Handlers that compute do not: the
worker's Python runs on one interpreter lock, so past a few at once they only take turns on it —
every batch takes longer, none more finish — and whatever else the process does (a parent workflow
woken by its thousandth child, a lease, a heartbeat) waits behind all of them for its turn. So while
the process is busy computing (its CPU time over a window at least ``BUSY_CORES`` a second) and the
limit binds (on average at least ``BOUND`` of the allowed batches running), the autoscaler tries
half as many at once, and again, for as long as the consumer's rate of finished batches stays
within ``TOLERANCE`` of the best it measured; the first halving that costs more sets it back one
step, where it stays. From there it tries twice as many every ``PROBE_SECONDS`` (at once if a bound
window finds the process idle, below ``IDLE_CORES``), keeping each doubling that raises the rate by
``TOLERANCE``, up to the cap; at the cap, a busy process tries halving again every ``PROBE_SECONDS``.
A window is at least ``WINDOW_BATCHES`` finished batches (and four per allowed slot) over at least
``WINDOW_MIN_SECONDS`` (a shorter one measured a stall, a checkpoint's flush or a burst of writes
elsewhere in the process, as often as the limit), or ``WINDOW_SECONDS`` if that comes first, so
that slots held by slow handlers cannot stall the fit.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable

from conveyor import limits

log = logging.getLogger("conveyor.autoscaler")

# The process counts as busy computing from this much CPU time a second (the interpreter lock is one
# core's worth; C code that lets it go adds more), and as idle below this much: a fitted limit is
# tried higher at once when it finds the process idle (handlers that now wait instead). Fewer at once
# make a busy process somewhat less busy, so "not busy" alone is no sign that more would pay.
BUSY_CORES = 0.75
IDLE_CORES = 0.25
# The limit binds while on average this share of the allowed batches runs.
BOUND = 0.8
# A rate within this share of the best is as good as it; a doubling must beat the rate by as much.
TOLERANCE = 0.1
# A window: at least this many finished batches, and four per allowed slot...
WINDOW_BATCHES = 32
# ...over at least this long...
WINDOW_MIN_SECONDS = 0.25
# ...unless this much time passed first (then its rate is what finished in it).
WINDOW_SECONDS = 1.0
# How long a fitted limit stays before a doubling is tried again.
PROBE_SECONDS = 30.0


class _Fit(enum.Enum):
    OPEN = "open"  # at the cap: nothing measured against it
    HALVING = "halving"  # trying half as many while the rate holds
    FITTED = "fitted"  # the fewest that kept the rate
    DOUBLING = "doubling"  # trying twice as many


class Autoscaler:
    """Concurrency of one consumer: ``running`` now, ``allowed`` at most.

    ``allowed`` is the smaller of ``fitted`` (what the rate of finished batches justifies, the cap
    until measured) and the failure back-off. ``cpu_seconds`` is the process's CPU clock, ``None``
    for no fitting (a simulation, whose handlers only hold); ``clock`` a monotonic one.
    """

    def __init__(
        self,
        queue: str,
        max_concurrency: int | None,
        *,
        cpu_seconds: Callable[[], float] | None = time.process_time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.queue = queue
        self.cap = max_concurrency or limits.MAX_CONCURRENCY
        self.fitted = self.cap
        self.allowed = self.cap
        self.running = 0
        self.peak = 0
        self._backoff = self.cap  # halved by each failure, doubled by each success
        self._cpu = cpu_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._fit = _Fit.OPEN
        self._best = 0.0  # the rate (batches/s) the halving or doubling is measured against
        self._fitted_at = 0.0
        self._window_start()

    def has_room(self) -> bool:
        if self._cpu is not None and self.running >= self.allowed:
            with self._lock:  # every slot is held: a window may have run out of time
                self._tick(self._clock(), finished=False)
        return self.running < self.allowed

    def started(self) -> None:
        with self._lock:
            if self._cpu is not None:
                self._tick(self._clock(), finished=False)
            self.running += 1
            if self.running > self.peak:
                self.peak = self.running
                log.info("queue %s: consumer concurrency %d", self.queue, self.running)

    def finished(self, failed: bool) -> None:
        with self._lock:
            if self._cpu is not None:
                self._tick(self._clock(), finished=True)
            self.running -= 1
            before = self.allowed
            self._backoff = max(1, self.allowed // 2) if failed else min(self.cap, self._backoff * 2)
            self._set_allowed()
            if self.allowed != before:
                log.info(
                    "queue %s: handlers %s; concurrency allowed %d -> %d",
                    self.queue,
                    "failing" if failed else "recovered",
                    before,
                    self.allowed,
                )

    # -- fitting (under the lock) -----------------------------------------------------------------
    def _set_allowed(self) -> None:
        self.allowed = min(self.fitted, self._backoff)

    def _window_start(self, warm_up: int = 0) -> None:
        """Start measuring, after ``warm_up`` more batches have finished (or ``WINDOW_SECONDS``)."""
        self._w_start = self._w_last = self._clock()
        self._w_cpu = self._cpu() if self._cpu is not None else 0.0
        self._w_batches = 0
        self._w_held = 0.0  # the integral of `running` over the window, batch-seconds
        self._w_allowed = self.allowed
        self._w_warm_up = warm_up

    def _tick(self, now: float, *, finished: bool) -> None:
        """Account the time since the last event; close the window when it is complete."""
        if self.running > self.allowed:  # the batches of a higher limit still ending: not this one's
            self._window_start(self.allowed)
            return
        elapsed = now - self._w_start
        if self._w_warm_up:
            # The batches running when the limit moved started under the old one, some of them long
            # before: they end sooner (after a halving) or later (after a doubling) than the new
            # limit's own, so a window starts once as many have ended as the limit allows.
            self._w_warm_up -= finished
            if not self._w_warm_up or elapsed >= WINDOW_SECONDS:
                self._window_start()
            return
        self._w_held += self.running * (now - self._w_last)
        self._w_last = now
        self._w_batches += finished
        enough = self._w_batches >= max(WINDOW_BATCHES, 4 * self._w_allowed) and elapsed >= WINDOW_MIN_SECONDS
        if not enough and elapsed < WINDOW_SECONDS:
            return
        if self.allowed == self._w_allowed and elapsed > 0:  # a failure's back-off voids the window
            assert self._cpu is not None
            cores = (self._cpu() - self._w_cpu) / elapsed
            if self._w_held / elapsed >= BOUND * self._w_allowed:  # the limit bound
                self._judge(now, self._w_batches / elapsed, cores)
        self._window_start(self.allowed if self.allowed != self._w_allowed else 0)

    def _judge(self, now: float, rate: float, cores: float) -> None:
        """One bound window's rate at ``fitted`` and the process's CPU in it: move the fit."""
        level = self.fitted
        if self._fit is _Fit.OPEN:
            if cores >= BUSY_CORES and level > 1:
                self._best = rate
                self._refit(_Fit.HALVING, level // 2, "the process is busy computing; trying fewer at once")
        elif self._fit is _Fit.HALVING:
            if rate < (1 - TOLERANCE) * self._best:
                self._settle(now, level * 2, f"{level} at once finish fewer ({rate:.0f}/s)")
                return
            self._best = max(self._best, rate)
            if level > 1:
                self._refit(_Fit.HALVING, level // 2, f"{level} at once finish as many ({rate:.0f}/s)")
            else:
                self._settle(now, level, f"1 at a time finishes as many ({rate:.0f}/s)")
        elif self._fit is _Fit.FITTED:
            if cores < IDLE_CORES and level < self.cap:
                self._best = rate
                self._refit(_Fit.DOUBLING, min(self.cap, level * 2), "the process is idle; trying more at once")
            elif now - self._fitted_at >= PROBE_SECONDS:
                self._best = rate
                if level < self.cap:
                    self._refit(_Fit.DOUBLING, min(self.cap, level * 2), "trying more at once")
                elif level > 1 and cores >= BUSY_CORES:
                    self._refit(_Fit.HALVING, level // 2, "the process is busy computing; trying fewer at once")
        elif rate < (1 + TOLERANCE) * self._best:  # doubling did not pay: back to the level before it
            self._settle(now, max(1, level // 2), f"{level} at once finish no more ({rate:.0f}/s)")
        else:  # doubling, and it paid
            self._best = rate
            if level < self.cap:
                self._refit(_Fit.DOUBLING, min(self.cap, level * 2), f"{level} at once finish more ({rate:.0f}/s)")
            else:
                self._refit(_Fit.OPEN, level, f"the cap finishes the most ({rate:.0f}/s)")

    def _settle(self, now: float, level: int, why: str) -> None:
        self._fitted_at = now
        self._refit(_Fit.FITTED, min(self.cap, level), why)

    def _refit(self, fit: _Fit, level: int, why: str) -> None:
        """Move to ``fit`` at ``level`` (the caller, :meth:`_tick`, starts the next window)."""
        before, self._fit, self.fitted = self.allowed, fit, level
        self._set_allowed()
        if self.allowed != before:
            log.info("queue %s: %s; concurrency allowed %d -> %d", self.queue, why, before, self.allowed)
