"""Back-pressure as Cloudflare's: a queue sent to faster than its rate is refused with 10250
(``Overloaded``, HTTP 429, with ``retry_after``), and a queue over its backlog or storage limit with
10251 (``StorageLimitExceeded``, HTTP 429 too), rather than every producer slowing down together.

The rate is a token bucket per queue: it refills at ``max_send_rate`` messages a second and holds one
second's worth, a batch of 100 takes 100, and a batch is taken whole or refused whole (a batch larger
than the bucket goes once the bucket is full, leaving it in debt, so the rate holds over time). The
backlog and storage limits compare the queue's figures, as read at most ``FIGURES_SECONDS`` ago (or as
the last send returned them), with what the batch would add: no send scans the queue, and concurrent
sends may pass a limit by what they carry. The figures are per process: each server (or embedded
process) on one deployment keeps its own buckets.

>>> cv = conveyor.connect("sqlite:///tmp/q", queue_limits=conveyor.QueueLimits(max_send_rate=1000))
>>> cv.queue("emails").send_batch(batch)   # Overloaded(retry_after=0.4) past 1,000 messages a second
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from conveyor.engine.accounts import split
from conveyor.errors import InvalidSetting, Overloaded, StorageLimitExceeded
from conveyor.model import Metrics, NewMessage

# How old the backlog figures a send is checked against may be.
FIGURES_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class QueueLimits:
    """Per-queue limits on sends; ``None`` is no limit (the default: nothing is refused).

    >>> conveyor.QueueLimits(max_send_rate=5000, max_backlog=1_000_000, max_queue_bytes=10 * 2**30)
    """

    max_send_rate: float | None = None  # messages a second, per queue (bursts of one second's worth)
    max_backlog: int | None = None  # messages stored in a queue
    max_queue_bytes: int | None = None  # bytes of message bodies stored in a queue

    def __post_init__(self) -> None:
        rate = self.max_send_rate
        number = isinstance(rate, int | float) and not isinstance(rate, bool)
        if rate is not None and not (number and 0 < rate < math.inf):
            raise InvalidSetting(f"max_send_rate is {rate!r}; it must be a number of messages a second above 0")
        for name in ("max_backlog", "max_queue_bytes"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InvalidSetting(f"{name} is {value!r}; it must be a whole number from 1")

    @property
    def active(self) -> bool:
        return self.max_send_rate is not None or self.max_backlog is not None or self.max_queue_bytes is not None


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float


@dataclass(slots=True)
class _Figures:
    count: int
    nbytes: int
    read_at: float


class SendGate:
    """The buckets and backlog figures of every queue of one engine (see the module docstring).

    ``metrics`` reads a queue's figures; ``name`` its name (for refusals). Safe across threads."""

    def __init__(
        self,
        limits: QueueLimits,
        metrics: Callable[[str], Metrics],
        name: Callable[[str], str],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self._metrics = metrics
        self._name = name
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._figures: dict[str, _Figures] = {}
        self._names: dict[str, str] = {}
        self._lock = threading.Lock()

    def admit(self, queue_id: str, messages: Sequence[NewMessage]) -> None:
        """Take the batch's messages from the queue's bucket, or refuse it whole, taking nothing."""
        if self.limits.max_backlog is not None or self.limits.max_queue_bytes is not None:
            self._check_room(queue_id, len(messages), sum(len(m.body) for m in messages))
        if self.limits.max_send_rate is not None:
            self._take(queue_id, len(messages), self.limits.max_send_rate)

    def refund(self, queue_id: str, count: int) -> None:
        """Give back what :meth:`admit` took for a batch the engine then refused."""
        with self._lock:
            bucket = self._buckets.get(queue_id)
            if bucket is not None and self.limits.max_send_rate is not None:
                bucket.tokens = min(self.limits.max_send_rate, bucket.tokens + count)

    def observed(self, queue_id: str, metrics: Metrics) -> None:
        """The queue's figures as a send just returned them: fresher than any read."""
        with self._lock:
            self._figures[queue_id] = _Figures(metrics.backlog_count, metrics.backlog_bytes, self._clock())

    def forget(self, queue_id: str) -> None:
        """Drop what is kept of a deleted queue."""
        with self._lock:
            self._buckets.pop(queue_id, None)
            self._figures.pop(queue_id, None)
            self._names.pop(queue_id, None)

    def _take(self, queue_id: str, count: int, rate: float) -> None:
        with self._lock:
            now = self._clock()
            bucket = self._buckets.setdefault(queue_id, _Bucket(rate, now))
            bucket.tokens = min(rate, bucket.tokens + (now - bucket.stamp) * rate)
            bucket.stamp = now
            need = min(count, rate)
            if bucket.tokens >= need:
                bucket.tokens -= count
                return
            wait = (need - bucket.tokens) / rate
        raise Overloaded(
            f"queue {self._queue_name(queue_id)!r} is over its send rate of {rate:g} messages a second: "
            f"{count} message(s) refused; retry in {wait:.2f} s",
            retry_after=wait,
        )

    def _check_room(self, queue_id: str, count: int, nbytes: int) -> None:
        with self._lock:
            figures = self._figures.get(queue_id)
        if figures is None or self._clock() - figures.read_at > FIGURES_SECONDS:
            self.observed(queue_id, self._metrics(queue_id))
            with self._lock:
                figures = self._figures[queue_id]
        most, most_bytes = self.limits.max_backlog, self.limits.max_queue_bytes
        if most is not None and figures.count + count > most:
            self._full(queue_id, f"holds {figures.count} messages; {count} more would pass its backlog limit of {most}")
        if most_bytes is not None and figures.nbytes + nbytes > most_bytes:
            self._full(
                queue_id, f"holds {figures.nbytes} bytes; {nbytes} more would pass its storage limit of {most_bytes}"
            )

    def _full(self, queue_id: str, why: str) -> None:
        # Consumers drain a queue at their own pace: the figures are read again within FIGURES_SECONDS.
        raise StorageLimitExceeded(f"queue {self._queue_name(queue_id)!r} {why}", retry_after=FIGURES_SECONDS)

    def _queue_name(self, queue_id: str) -> str:
        """The queue's name as its account knows it (``emails``, not ``acc1/emails``); ids are never
        reused and names never change, so it is read once."""
        with self._lock:
            known = self._names.get(queue_id)
        if known is None:
            known = split(self._name(queue_id))[1]
            with self._lock:
                self._names[queue_id] = known
        return known
