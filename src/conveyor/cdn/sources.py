"""Where ``cdn serve`` reads a published object: the primary bucket behind a circuit breaker, then
the mirror — so a primary that refuses connections, errs or hangs costs no request a timeout.

A read tries the primary only while its :class:`CircuitBreaker` allows it, and waits for it at most
``hedge_seconds``: past that (or on an error) the read goes to the mirror and the primary's failure
is counted. ``failures`` failures in a row open the breaker: for ``cooldown_seconds`` no read tries
the primary at all; then one read at a time probes it (half-open) until one succeeds. The primary's
reads run on threads of their own, so reads hanging there never hold up the mirror's. A mirror read
that can be made without waiting (:meth:`~conveyor.Bucket.get_nowait`: a small object of a local
bucket) is made on the caller's thread, the event loop's; others on threads of the mirror's own.

>>> source = ObjectSource(primary, mirror)
>>> await source.read("jquery/3.7.1/jquery.min.js.br")      # bytes, or None when neither has it
>>> source.read_nowait("jquery/3.7.1/jquery.min.js.br")     # bytes, or None: await read() then
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import conveyor

HEDGE_SECONDS = 0.5
FAILURES_TO_OPEN = 3
COOLDOWN_SECONDS = 5.0


class CircuitBreaker:
    """Closed (every read tries the primary), open (none does), half-open (one probe at a time)."""

    def __init__(
        self,
        failures: int = FAILURES_TO_OPEN,
        cooldown_seconds: float = COOLDOWN_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failures_to_open = failures
        self.cooldown_seconds = cooldown_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._open_until = 0.0
        self._probing = False
        self.opened = 0  # how many times it opened

    @property
    def is_open(self) -> bool:
        return self._failures >= self.failures_to_open

    def allow(self) -> bool:
        with self._lock:
            if self._failures < self.failures_to_open:
                return True
            if self._probing or self._clock() < self._open_until:
                return False
            self._probing = True
            return True

    def refuses(self) -> bool:
        """Whether :meth:`allow` would say no now (asking takes no probe)."""
        with self._lock:
            return self._failures >= self.failures_to_open and (self._probing or self._clock() < self._open_until)

    def success(self) -> None:
        with self._lock:
            self._failures = 0
            self._probing = False

    def failure(self) -> None:
        with self._lock:
            self._failures += 1
            self._probing = False
            if self._failures >= self.failures_to_open:
                if self._failures == self.failures_to_open:
                    self.opened += 1
                self._open_until = self._clock() + self.cooldown_seconds


def _read(bucket: conveyor.Bucket, key: str) -> bytes | None:
    try:
        return bucket.get(key).bytes()
    except conveyor.ObjectNotFound:
        return None


class ObjectSource:
    """Reads of published objects, primary first (see the module docstring)."""

    def __init__(
        self,
        primary: conveyor.Bucket,
        mirror: conveyor.Bucket | None,
        *,
        breaker: CircuitBreaker | None = None,
        hedge_seconds: float = HEDGE_SECONDS,
        threads: int = 16,
    ) -> None:
        self.primary = primary
        self.mirror = mirror
        self.breaker = breaker or CircuitBreaker()
        self.hedge_seconds = hedge_seconds
        self._primary_threads = ThreadPoolExecutor(threads, thread_name_prefix="cdn-primary")
        self._mirror_threads = ThreadPoolExecutor(threads, thread_name_prefix="cdn-mirror")
        self.primary_failures = 0
        self.mirror_reads = 0

    def close(self) -> None:
        self._primary_threads.shutdown(wait=False, cancel_futures=True)
        self._mirror_threads.shutdown(wait=False, cancel_futures=True)

    async def read(self, key: str) -> bytes | None:
        """The object's bytes; None when no bucket has it. Raises only when the primary cannot be
        read and there is no mirror, or the mirror fails too."""
        loop = asyncio.get_running_loop()
        primary_error: BaseException | None = None
        if self.breaker.allow():
            future = loop.run_in_executor(self._primary_threads, _read, self.primary, key)
            try:
                data = await asyncio.wait_for(asyncio.shield(future), self.hedge_seconds)
            except (TimeoutError, conveyor.ConveyorError, OSError) as exc:
                primary_error = exc
                future.add_done_callback(_drop_result)
                self.breaker.failure()
                self.primary_failures += 1
            else:
                self.breaker.success()
                if data is not None or self.mirror is None:
                    return data
        if self.mirror is None:
            if primary_error is not None:
                raise primary_error
            raise conveyor.BucketUnreachable(f"bucket {self.primary.name!r}: unavailable (its circuit is open)")
        self.mirror_reads += 1
        try:
            body = self.mirror.get_nowait(key)
        except conveyor.ObjectNotFound:
            return None
        if body is not None:
            return body.bytes()
        return await loop.run_in_executor(self._mirror_threads, _read, self.mirror, key)

    def read_nowait(self, key: str) -> bytes | None:
        """The object's bytes when they can be had at once: while the breaker keeps reads off the
        primary, from a mirror that reads them without waiting; None otherwise (the primary is to be
        tried, the mirror would wait, neither has it, or it failed): :meth:`read` answers then."""
        if self.mirror is None or not self.breaker.refuses():
            return None
        try:
            body = self.mirror.get_nowait(key)
        except conveyor.ConveyorError:  # ObjectNotFound too: read() answers for it
            return None
        if body is None:
            return None
        self.mirror_reads += 1
        return body.bytes()


def _drop_result(future: asyncio.Future[bytes | None]) -> None:
    if not future.cancelled():
        future.exception()  # retrieved, so an abandoned read's failure is not logged as unhandled
