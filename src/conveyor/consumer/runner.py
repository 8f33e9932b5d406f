"""Runs handlers: plain functions on a thread pool, coroutines on one event loop thread.

``submit`` calls ``on_done(error)`` exactly once when the handler returns (``None``) or raises (the
exception). A coroutine past its time limit is cancelled; a plain function cannot be stopped from
outside, so its time limit is enforced by the dispatcher's watchdog, which settles the batch as
failed and ignores whatever the thread does later.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from conveyor import tracing
from conveyor.model import StoredMessage

Handler = Callable[[Any], Any]
OnDone = Callable[[BaseException | None], None]


def handling(queue: str, stored: list[StoredMessage]) -> tracing.TraceContext | None:
    """The trace a handler of ``stored`` runs in: the message's, for a batch of one message that
    carries one (a bigger batch mixes traces: its handler reads each ``m.traceparent``)."""
    if len(stored) != 1 or stored[0].traceparent is None:
        return None
    return tracing.TraceContext(stored[0].traceparent, queue=queue, message=stored[0].id)


def _run_traced(trace: tracing.TraceContext, handler: Handler, batch: Any) -> Any:
    with tracing.activate(trace, f"process {trace.queue}", {"messaging.message.id": trace.message}, "CONSUMER"):
        return handler(batch)


async def _await_traced(trace: tracing.TraceContext, handler: Handler, batch: Any) -> Any:
    with tracing.activate(trace, f"process {trace.queue}", {"messaging.message.id": trace.message}, "CONSUMER"):
        return await handler(batch)


class HandlerTimeout(Exception):
    """A handler ran past its wall-time limit; its batch is retried as a failure."""


class HandlerRunner:
    def __init__(self) -> None:
        # Bounded in practice by the dispatchers' concurrency: a thread is started only when none is
        # idle. A handler thread abandoned to a call that cannot be stopped (batch.settle_early) is
        # thus never a place the handlers lack.
        self._pool = ThreadPoolExecutor(max_workers=1_000_000, thread_name_prefix="conveyor-handler")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_lock = threading.Lock()

    @staticmethod
    def is_async(handler: Handler) -> bool:
        return inspect.iscoroutinefunction(handler)

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        with self._loop_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="conveyor-async-handlers", daemon=True).start()
                self._loop = loop
            return self._loop

    def submit(
        self, handler: Handler, batch: Any, timeout: float, on_done: OnDone, trace: tracing.TraceContext | None = None
    ) -> None:
        """Run ``handler(batch)`` (in ``trace``, if given)."""
        if self.is_async(handler):
            work = handler(batch) if trace is None else _await_traced(trace, handler, batch)
            coro = self._run_async(work, timeout)
            future: Future[None] = asyncio.run_coroutine_threadsafe(coro, self._event_loop())
        elif trace is None:
            future = self._pool.submit(handler, batch)
        else:
            future = self._pool.submit(_run_traced, trace, handler, batch)
        future.add_done_callback(lambda f: on_done(None if f.cancelled() else f.exception()))

    @staticmethod
    async def _run_async(awaitable: Awaitable[Any], timeout: float) -> None:
        try:
            await asyncio.wait_for(awaitable, timeout)
        except TimeoutError:
            raise HandlerTimeout(f"handler ran past its time limit of {timeout:g} s") from None

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
