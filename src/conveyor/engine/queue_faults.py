"""Keeping one damaged queue from stopping a maintenance service for every queue.

A service (retention expiry, shard splitting) walks every queue. A queue whose storage fails is
skipped, the others go on; the failure is logged when the queue goes bad and again when it works
once more, not on every round (a coordinator runs its services every few seconds).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from conveyor.errors import ConveyorError, QueueNotFound
from conveyor.model import QueueInfo


class QueueFaults:
    """The queues one service found failing, and their last error.

    >>> faults = QueueFaults("retention", logging.getLogger("conveyor.engine"))
    >>> for queue in engine.list_queues():
    ...     with faults.isolated(queue):
    ...         expire_one(queue)
    """

    def __init__(self, service: str, log: logging.Logger) -> None:
        self.service = service
        self.log = log
        self._failing: dict[str, str] = {}

    @contextmanager
    def isolated(self, queue: QueueInfo) -> Iterator[None]:
        """Run the service's work on ``queue``; an error skips this queue only (reported once)."""
        try:
            yield
        except QueueNotFound:
            self._failing.pop(queue.queue_id, None)  # deleted meanwhile: nothing to report
        except ConveyorError as exc:
            self._failed(queue, str(exc), traceback=False)
        except Exception as exc:
            # Deliberately broad: this is the isolation boundary between queues. An unexpected error
            # (a bug, a driver's own exception) is logged with its traceback, not hidden.
            self._failed(queue, f"{type(exc).__name__}: {exc}", traceback=True)
        else:
            if self._failing.pop(queue.queue_id, None) is not None:
                self.log.warning("%s works again for queue %s (%s)", self.service, queue.queue_name, queue.queue_id)

    def failing(self) -> dict[str, str]:
        """Queue id -> error text of every queue this service skips now."""
        return dict(self._failing)

    def _failed(self, queue: QueueInfo, error: str, *, traceback: bool) -> None:
        if self._failing.get(queue.queue_id) == error:
            return
        self._failing[queue.queue_id] = error
        self.log.error(
            "%s skips queue %s (%s) until its storage is repaired: %s; `conveyor doctor` says what to do",
            self.service,
            queue.queue_name,
            queue.queue_id,
            error,
            exc_info=traceback,
        )
