"""A process's copies of queue settings, for ``PostgresEngine.queue_settings``.

A dispatcher asks for its queue's settings on every loop, and reading the catalog each time would be
a round trip per loop, a large part of the lease thread's time (benchmarks/README.md). Each lease
that returns messages reads the settings in the same statement and hands them here, so a busy
consumer's copy is one loop old; an idle one reads the catalog again after ``SETTINGS_SECONDS``. A
copy read before this process last changed the queue is never kept, and a copy never replaces a
later-read one.
"""

from __future__ import annotations

import threading
import time

from conveyor.model import QueueSettings

# How long a process trusts its copy of a queue's settings.
SETTINGS_SECONDS = 0.1


class SettingsCache:
    def __init__(self) -> None:
        self._copies: dict[str, tuple[float, QueueSettings]] = {}
        # Per queue, when this process last changed its settings: copies read before are not kept.
        self._floor: dict[str, float] = {}
        self._lock = threading.Lock()

    def get(self, queue_id: str, now: float) -> QueueSettings | None:
        """The copy read within ``SETTINGS_SECONDS`` of ``now`` (monotonic), if there is one."""
        with self._lock:
            cached = self._copies.get(queue_id)
        if cached is not None and now - cached[0] < SETTINGS_SECONDS:
            return cached[1]
        return None

    def remember(self, queue_id: str, settings: QueueSettings, read_at: float) -> None:
        """Keep settings read by a statement sent at ``read_at`` (monotonic), unless they are older
        than the copy kept or than this process's last change to them."""
        with self._lock:
            cached = self._copies.get(queue_id)
            if read_at < self._floor.get(queue_id, 0.0) or (cached is not None and cached[0] > read_at):
                return
            self._copies[queue_id] = (read_at, settings)

    def forget(self, queue_id: str) -> None:
        """This process changed the queue: drop its copy, and refuse copies read before now."""
        with self._lock:
            self._copies.pop(queue_id, None)
            self._floor[queue_id] = time.monotonic()
