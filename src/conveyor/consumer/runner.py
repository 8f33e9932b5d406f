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

from conveyor import limits

Handler = Callable[[Any], Any]
OnDone = Callable[[BaseException | None], None]


class HandlerTimeout(Exception):
    """A handler ran past its wall-time limit; its batch is retried as a failure."""


class HandlerRunner:
    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=limits.MAX_CONCURRENCY + 8, thread_name_prefix="conveyor-handler")
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

    def submit(self, handler: Handler, batch: Any, timeout: float, on_done: OnDone) -> None:
        if self.is_async(handler):
            coro = self._run_async(handler(batch), timeout)
            future: Future[None] = asyncio.run_coroutine_threadsafe(coro, self._event_loop())
        else:
            future = self._pool.submit(handler, batch)
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
