"""A worker process's entry in the deployment's worker registry (``conveyor workers list``).

Recorded when the worker starts, renewed every HEARTBEAT_SECONDS with what it runs now, removed
when it stops; a worker that dies without stopping is dropped once its heartbeat is EXPIRY_MS old.
The registry is for people: a failure to record is logged (once per change) and never stops work.

>>> presence = WorkerPresence(engine, runs=lambda: [WorkerRun(queue_id, "emails", "myapp:handle")])
>>> presence.start()
>>> presence.stop()
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Sequence

from conveyor.engine.base import Engine
from conveyor.engine.worker_rows import HEARTBEAT_SECONDS
from conveyor.ids import new_id
from conveyor.model import WorkerEntry, WorkerRun

log = logging.getLogger("conveyor.worker")


class WorkerPresence:
    def __init__(self, engine: Engine, runs: Callable[[], Sequence[WorkerRun]]) -> None:
        self.engine = engine
        self.runs = runs
        self.worker_id = new_id()
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.started_ms = engine.clock.now_ms()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._problem: str | None = None

    def start(self) -> None:
        self.beat()
        self._thread = threading.Thread(target=self._loop, name="conveyor-worker-heartbeat", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            self.beat()

    def beat(self) -> None:
        """Record this worker now, with what it runs now."""
        entry = WorkerEntry(self.worker_id, self.host, self.pid, self.started_ms, 0, tuple(self.runs()))
        try:
            self.engine.record_worker(entry)
        except Exception as exc:
            if str(exc) != self._problem:
                self._problem = str(exc)
                log.warning("cannot record this worker in the registry (conveyor workers list): %s", exc)
            return
        if self._problem is not None:
            self._problem = None
            log.info("this worker is in the registry again")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.engine.remove_worker(self.worker_id)
        except Exception as exc:  # it expires from the registry on its own
            log.debug("could not remove this worker from the registry: %s", exc)
