"""``conveyor cdn run``: the whole CDN of an account in one command, the embedded default — the
CDN's workflows (PackageUpdatesWorkflow on its cron, the downloads, processing and publishing, the
relay of the staging bucket's notifications) in this process, ``compressors`` compressor
processes (:func:`conveyor.cdn.add_compressor`, one per core by default) and ``cdn serve``'s
server, until SIGINT or SIGTERM stops them all.

>>> run(cv, port=8788, on_ready=lambda port: print(f"serving on {port}"))   # until SIGINT/SIGTERM

Order: the CDN must exist (``conveyor cdn init``; else :class:`~conveyor.cdn.CdnNotInitialized`,
before anything starts); the workflows start, then the compressors, then one update at once when
``update_now`` (the cron's next tick may be minutes away), then the server, which answers until
the signal. At the signal the server stops taking requests, then the compressors get SIGTERM (each
finishes its file within its grace), then the workflows stop (a step running finishes or is taken
up again by the next worker): nothing half-done is lost, every piece is durable. A compressor that
dies while the CDN runs is replaced (and logged). The compressor processes watch this one and stop
when it is gone, whatever killed it.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType

import conveyor
from conveyor.cdn.client import update
from conveyor.cdn.compression import add_compressor
from conveyor.cdn.pipeline import account_of, add_workflows
from conveyor.cdn.server import CACHE_BYTES, DEFAULT_PORT, serve, stop_when_orphaned
from conveyor.cdn.store import CdnStore

log = logging.getLogger("conveyor.cdn")

MAX_COMPRESSORS = 64
COMPRESSOR_GRACE_SECONDS = 30.0
WORKFLOW_GRACE_SECONDS = 10.0
_WATCH_SECONDS = 1.0


def default_compressors() -> int:
    """One compressor per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class Compressors:
    """``count`` compressor child processes of the deployment ``url``, account ``account``, kept
    at that count until :meth:`stop`; the job of one that died is taken again after
    ``visibility_timeout_ms``."""

    def __init__(self, url: str, account: str, count: int, visibility_timeout_ms: int) -> None:
        self.command = [sys.executable, "-m", "conveyor.cdn.runner", "--url", url, "--account", account]
        self.command += ["--parent", str(os.getpid()), "--visibility-timeout-ms", str(visibility_timeout_ms)]
        self.processes = [self._start() for _ in range(count)]
        self._stopping = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="cdn-compressors", daemon=True)
        self._watcher.start()

    def _start(self) -> subprocess.Popen[bytes]:
        # A session of its own: a terminal's Ctrl-C reaches this process only, which stops them in order.
        return subprocess.Popen(self.command, start_new_session=True)

    def _watch(self) -> None:
        while not self._stopping.wait(_WATCH_SECONDS):
            for i, process in enumerate(self.processes):
                if process.poll() is not None and not self._stopping.is_set():
                    log.warning("compressor %d ended with status %s: starting another", process.pid, process.returncode)
                    self.processes[i] = self._start()

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def stop(self, grace: float = COMPRESSOR_GRACE_SECONDS) -> None:
        """SIGTERM to each (a job running gets ``grace`` seconds), SIGKILL past that."""
        self._stopping.set()
        self._watcher.join()
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + grace + 5
        for process in self.processes:
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("compressor %d did not stop within %.0f s: killed", process.pid, grace)
                process.kill()
                process.wait()


def run(
    cv: conveyor.Conveyor,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    compressors: int | None = None,
    processes: int = 1,
    cache_bytes: int = CACHE_BYTES,
    update_now: bool = True,
    visibility_timeout: float = 30.0,
    on_ready: Callable[[int], None] | None = None,
) -> None:
    """Run the account's CDN — workflows, ``compressors`` compressor processes (default: one per
    core; 0 for none here, e.g. when they run on other machines) and the server on ``host:port``
    with ``processes`` serving processes — until SIGINT/SIGTERM (so: from the main thread);
    ``on_ready(port)`` once it serves.
    ``update_now``: start one PackageUpdatesWorkflow at once, besides the cron's.
    ``visibility_timeout``: seconds the work of a process that died (a workflow run, a compression
    job) stays held before another process takes it up (a live one renews its hold)."""
    count = default_compressors() if compressors is None else compressors
    if not 0 <= count <= MAX_COMPRESSORS:
        raise conveyor.InvalidRequest(f"compressors: {count} is not within 0..{MAX_COMPRESSORS}")
    if not 1 <= processes <= 64:
        raise conveyor.InvalidRequest(f"processes: {processes} is not within 1..64")
    if not 1 <= visibility_timeout <= 43_200:
        raise conveyor.InvalidRequest(f"visibility_timeout: {visibility_timeout} s is not within 1..43200")
    hold_ms = int(visibility_timeout * 1000)
    if not cv.url or cv.url.startswith(("http://", "https://")):
        raise conveyor.InvalidRequest(
            "cdn run runs the CDN next to its deployment: give a sqlite:// or postgresql:// URL, not a server's"
        )
    store = CdnStore.open(cv.deployment)
    try:
        store.settings(account_of(cv))  # CdnNotInitialized says to run `conveyor cdn init`
    finally:
        store.close()

    stopping = threading.Event()
    serving = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if not stopping.is_set():
            log.info("received %s: stopping the CDN", signal.Signals(signum).name)
        stopping.set()

    # Ours until the server takes them, and again once it gave them back (it re-raises the signal
    # it stopped for, which lands here): the stop below is the same whichever came first.
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    app = conveyor.App(cv, grace_period=WORKFLOW_GRACE_SECONDS)
    workers: Compressors | None = None
    try:
        add_workflows(app, visibility_timeout_ms=hold_ms)
        app.start()
        if count:
            workers = Compressors(cv.url, account_of(cv), count, hold_ms)
        if update_now and not stopping.is_set():
            log.info("started update %s", update(cv))

        def ready(bound: int) -> None:
            serving.set()
            if stopping.is_set():  # a signal between our check and the server's handlers
                os.kill(os.getpid(), signal.SIGTERM)
            elif on_ready is not None:
                on_ready(bound)

        if not stopping.is_set():
            serve(cv, host=host, port=port, cache_bytes=cache_bytes, processes=processes, on_ready=ready)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if workers is not None:
            workers.stop()
        app.stop()


def _compressor_child() -> None:
    """A compressor process of :func:`run` (``python -m conveyor.cdn.runner``): it stops at
    SIGINT/SIGTERM, or when its parent is gone."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--account", required=True)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--visibility-timeout-ms", type=int, required=True)
    options = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")

    stop_when_orphaned(options.parent)
    with conveyor.connect(options.url, account_id=options.account) as cv:
        app = conveyor.App(cv, grace_period=COMPRESSOR_GRACE_SECONDS)
        add_compressor(app, visibility_timeout_ms=options.visibility_timeout_ms)
        app.run()


if __name__ == "__main__":
    _compressor_child()
