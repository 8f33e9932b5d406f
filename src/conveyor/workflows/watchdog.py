"""The watchdog of step attempts that run on their run's own thread.

A sync step's function runs on the thread of the run that calls ``step.do``: handing it to another
thread and back cost more than the step's durable write. Python cannot stop a thread, so the
per-attempt timeout is kept by one watchdog thread per process. It calls ``on_slow()`` once an
attempt has run ``show_after`` seconds (the attempt is shown as under way) and ``on_overrun()``
once it has run past its timeout. ``on_overrun`` hands the run on (the attempt is recorded as
failed and the instance is suspended for another run to go on from there); its thread is then
abandoned to finish on its own, and :meth:`Watchdog.end` tells it so.

The callbacks run on threads of their own, never on the watchdog's, so a slow write in one cannot
delay another attempt's timeout; an attempt's callbacks and its end are serialized by its lock.
Watching an attempt costs a lock and a set insertion, and ending it the same: the watchdog's thread
wakes when the first attempt it watches is due, or every ``PATROL_SECONDS`` while attempts come and
go, and is woken only by an attempt due sooner than that (so that a steady flow of short attempts
does not wake it once each: a thread's wake-up costs more than such a step's own Python).
"""

from __future__ import annotations

import enum
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger("conveyor.workflows")

# How often the watchdog looks while attempts start, when none is left to watch.
PATROL_SECONDS = 0.5


class State(enum.Enum):
    RUNNING = "running"
    ENDED = "ended"
    ABANDONED = "abandoned"


class Watch:
    """One attempt being watched: ``due`` is when the watchdog next looks at it (its ``show_at``,
    then its ``deadline``)."""

    __slots__ = ("deadline", "due", "lock", "on_overrun", "on_slow", "state")

    def __init__(
        self, show_at: float, deadline: float, on_slow: Callable[[], object], on_overrun: Callable[[], object]
    ) -> None:
        self.due = min(show_at, deadline)
        self.deadline = deadline
        self.on_slow = on_slow
        self.on_overrun = on_overrun
        self.state = State.RUNNING
        self.lock = threading.Lock()

    def overran(self) -> bool:
        return time.monotonic() >= self.deadline

    def _fire(self, overrun: bool) -> None:
        with self.lock:
            if self.state is not State.RUNNING:
                return
            if overrun:
                self.state = State.ABANDONED
            try:
                (self.on_overrun if overrun else self.on_slow)()
            except Exception:
                log.exception("a step attempt's %s failed", "timeout" if overrun else "progress record")


class Watchdog:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._watches: set[Watch] = set()
        self._waiting_until = math.inf  # when the watchdog's thread wakes next on its own
        self._started = False  # whether an attempt started since the watchdog last looked
        self._thread: threading.Thread | None = None
        # The callbacks' threads: one is started only when none is idle.
        self._callbacks = ThreadPoolExecutor(max_workers=1_000, thread_name_prefix="conveyor-step-watch")

    def watch(
        self, timeout: float, show_after: float, on_slow: Callable[[], object], on_overrun: Callable[[], object]
    ) -> Watch:
        """Watch an attempt that starts now with ``timeout`` seconds."""
        now = time.monotonic()
        watch = Watch(now + show_after, now + timeout, on_slow, on_overrun)
        with self._cond:
            self._watches.add(watch)
            self._started = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="conveyor-step-watchdog", daemon=True)
                self._thread.start()
            if watch.due < self._waiting_until:
                self._cond.notify()
        return watch

    def end(self, watch: Watch) -> bool:
        """The attempt's function returned: False if its run was handed on meanwhile (the caller
        must then let go without writing anything)."""
        with watch.lock:
            abandoned = watch.state is State.ABANDONED
            watch.state = State.ENDED
        with self._cond:
            self._watches.discard(watch)
        return not abandoned

    def _loop(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                for w in [w for w in self._watches if w.due <= now]:
                    overrun = w.deadline <= now
                    if overrun:
                        self._watches.discard(w)
                    else:
                        w.due = w.deadline
                    self._callbacks.submit(w._fire, overrun)
                soonest = min((w.due for w in self._watches), default=math.inf)
                self._waiting_until = min(soonest, now + PATROL_SECONDS) if self._started else soonest
                self._started = False
                self._cond.wait(None if self._waiting_until == math.inf else self._waiting_until - now)


WATCHDOG = Watchdog()
