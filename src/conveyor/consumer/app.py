"""``App``: push consumers declared with a decorator, run by ``app.run()`` or ``conveyor worker``."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

from conveyor import limits
from conveyor.broker.coordinator import Coordinator
from conveyor.client import validation as check
from conveyor.client.sync import Conveyor
from conveyor.consumer.dispatcher import ConsumerSpec, Dispatcher
from conveyor.consumer.presence import WorkerPresence
from conveyor.consumer.runner import HandlerRunner
from conveyor.errors import ConsumerExists, InvalidRequest
from conveyor.model import ConsumerSettings, WorkerRun

if TYPE_CHECKING:
    from conveyor.storage.maintenance import StorageMaintenance

log = logging.getLogger("conveyor.worker")
F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_GRACE_SECONDS = 30.0

# How often the leader deletes the rows of expired KV keys (they are invisible at once).
KV_PURGE_SECONDS = 60.0


class App:
    """A set of push consumers, run together.

    >>> app = conveyor.App("sqlite:///tmp/conveyor")
    >>> @app.consumer("emails", max_batch_size=10, dead_letter_queue="emails-dlq")
    ... def handle(batch):
    ...     for m in batch.messages:
    ...         m.ack()
    >>> app.run()          # until SIGINT/SIGTERM, then a graceful stop
    """

    def __init__(self, conveyor: Conveyor | str | None = None, *, grace_period: float = DEFAULT_GRACE_SECONDS) -> None:
        if conveyor is None or isinstance(conveyor, str):
            from conveyor.client.connect import connect

            conveyor = connect(conveyor)
        self.conveyor = conveyor
        self.grace_period = grace_period
        self.specs: list[ConsumerSpec] = []
        self.dispatchers: dict[str, Dispatcher] = {}
        self._runner: HandlerRunner | None = None
        self._coordinator: Coordinator | None = None
        self._storage_maintenance: StorageMaintenance | None = None
        self._stop = threading.Event()
        # Whether start() records this process in the worker registry; a host that runs several
        # apps (conveyor serve) keeps one entry for all of them instead.
        self.registers_itself = True
        self._presence: WorkerPresence | None = None
        self.workflows: list[Any] = []  # conveyor.workflows.registration.WorkflowDefinition
        self._on_start: list[Callable[[], object]] = []
        self._services: list[tuple[str, float, Callable[[], object]]] = []

    def consumer(
        self,
        queue: str,
        *,
        max_batch_size: int = limits.DEFAULT_MAX_BATCH_SIZE,
        max_batch_timeout: float = limits.DEFAULT_MAX_BATCH_TIMEOUT,
        max_retries: int = limits.DEFAULT_MAX_RETRIES,
        retry_delay: int = 0,
        dead_letter_queue: str | None = None,
        max_concurrency: int | None = None,
        visibility_timeout_ms: int = limits.DEFAULT_VISIBILITY_TIMEOUT_MS,
        handler_timeout: float = limits.DEFAULT_HANDLER_TIMEOUT,
    ) -> Callable[[F], F]:
        """Declare ``fn(batch)`` (plain or ``async``) as the push consumer of ``queue``."""
        check.check_queue_name(queue)
        if dead_letter_queue is not None:
            check.check_queue_name(dead_letter_queue)
            if dead_letter_queue == queue:
                # Dead-lettering into the queue itself would redeliver forever with attempts reset.
                raise InvalidRequest(f"queue {queue!r} cannot be its own dead letter queue")
        if not isinstance(max_batch_timeout, int | float) or not 0 <= max_batch_timeout <= limits.MAX_BATCH_TIMEOUT:
            check.check_range("max_batch_timeout", max_batch_timeout, 0, int(limits.MAX_BATCH_TIMEOUT))
        settings = check.check_consumer_settings(
            ConsumerSettings(
                batch_size=max_batch_size,
                max_retries=max_retries,
                max_wait_time_ms=int(max_batch_timeout * 1000),
                max_concurrency=max_concurrency,
                retry_delay=retry_delay,
                visibility_timeout_ms=visibility_timeout_ms,
            )
        )
        if handler_timeout <= 0:
            check.check_range("handler_timeout", handler_timeout, 1, 10**9)
        if any(spec.queue == queue for spec in self.specs):
            raise ConsumerExists(f"this app already has a consumer for queue {queue!r}")

        def register(fn: F) -> F:
            self.specs.append(ConsumerSpec(queue, fn, settings, dead_letter_queue, float(handler_timeout)))
            return fn

        return register

    def workflow(
        self,
        name: str,
        *,
        schedules: list[str] | None = None,
        max_steps: int = 10_000,
        concurrency: int | None = None,
        success_retention: float | str | None = None,
        error_retention: float | str | None = None,
        visibility_timeout_ms: int = limits.DEFAULT_VISIBILITY_TIMEOUT_MS,
    ) -> Callable[[F], F]:
        """Declare ``fn(event, step) -> output`` (plain or ``async``) as the workflow ``name``; this
        app runs its instances (see :mod:`conveyor.workflows`). Retention of finished instances:
        3 days complete, 7 days errored unless given (seconds or ``"1 day"``). ``concurrency``:
        instances run at once in this worker, 1 to 250; not set, at most 32
        (``registration.DEFAULT_CONCURRENCY``, not a queue consumer's 250: more runs on one
        interpreter lock and one store only wait their turn; set it higher for steps that wait on
        I/O for long).

        >>> @app.workflow("download-package", max_steps=100)
        ... def download(event, step):
        ...     return step.do("fetch", lambda: fetch(event.payload["name"]))
        """
        from conveyor.workflows.registration import define

        def register(fn: F) -> F:
            if any(d.name == name for d in self.workflows):
                raise ConsumerExists(f"this app already has a workflow {name!r}")
            self.workflows.append(
                define(
                    name,
                    fn,
                    schedules=schedules,
                    max_steps=max_steps,
                    concurrency=concurrency,
                    success_retention=success_retention,
                    error_retention=error_retention,
                    visibility_timeout_ms=visibility_timeout_ms,
                )
            )
            return fn

        return register

    def on_start(self, fn: Callable[[], object]) -> None:
        """Call ``fn()`` when the app starts, before delivery begins: how a tool built on the app
        (the prober) records what this worker runs."""
        self._on_start.append(fn)

    def add_coordinator_service(self, name: str, interval: float, service: Callable[[], object]) -> None:
        """Run ``service`` every ``interval`` seconds in this process's coordinator while it leads
        the deployment (a tool's maintenance, such as the prober's sweeper); names are unique."""
        if any(existing == name for existing, _, _ in self._services):
            raise ValueError(f"coordinator service {name!r} is already added")
        self._services.append((name, interval, service))

    # -- running ------------------------------------------------------------------------------
    def start(self) -> None:
        """Register the consumers and start delivering in background threads."""
        if self._runner is not None:
            return
        self._stop.clear()
        engine = self.conveyor.engine
        runner = HandlerRunner()
        dispatchers: dict[str, Dispatcher] = {}
        targets = [(self.conveyor.queue(spec.queue).id, spec) for spec in self.specs]
        targets += [definition.start(self.conveyor) for definition in self.workflows]
        for hook in self._on_start:
            hook()
        for queue_id, spec in targets:
            self._register(queue_id, spec)
            dispatchers[spec.queue] = Dispatcher(engine, queue_id, spec, runner)
        self._runner, self.dispatchers = runner, dispatchers
        deployment = engine.deployment_engine()  # None in a server's account views: it coordinates
        if deployment is not None:
            self._coordinator = Coordinator(deployment)
            # The deployment's maintenance, whatever this process runs: the coordinator may be a
            # process without workflows or buckets while other processes have them.
            from conveyor.storage.maintenance import add_storage_services
            from conveyor.workflows.retention import add_workflow_services

            add_workflow_services(self._coordinator, self.conveyor)

            self._storage_maintenance = add_storage_services(self._coordinator, deployment)
            self._coordinator.add_service("kv-expiry", KV_PURGE_SECONDS, self._purge_expired_kv)
            for name, interval, service in self._services:
                self._coordinator.add_service(name, interval, service)
            self._coordinator.start()
        for dispatcher in dispatchers.values():
            dispatcher.start()
        if self.registers_itself:
            self._presence = WorkerPresence(engine, self.runs)
            self._presence.start()
        log.info("worker started: consumers for %s", ", ".join(d.spec.queue for d in dispatchers.values()))

    def _purge_expired_kv(self) -> int:
        from conveyor.storage.kv_handle import kv_store  # lazily: the queues do not need KV

        return kv_store(self.conveyor).purge_expired()

    def _register(self, queue_id: str, spec: ConsumerSpec) -> None:
        """Register the push consumer, or update it if this script already is the queue's consumer.

        Several worker processes of one app start at once: when another registered it between our
        read and our insert, its registration is ours too, and the second look finds it.
        """
        engine = self.conveyor.engine
        dlq = spec.dead_letter_queue or ""
        for _ in range(2):
            for existing in engine.get_queue_by_id(queue_id).consumers:
                if existing.type == "worker" and existing.script_name == spec.script_name:
                    engine.update_consumer(existing.consumer_id, spec.settings, dlq)
                    return
                raise ConsumerExists(
                    f"queue {spec.queue!r} already has a consumer ({existing.type} {existing.script_name!r}); "
                    "remove it first: conveyor queues consumer remove"
                )
            try:
                engine.add_consumer(queue_id, "worker", spec.script_name, spec.settings, dlq)
                return
            except ConsumerExists:
                continue
        raise ConsumerExists(f"queue {spec.queue!r}: its consumer changed while this worker registered; try again")

    def stop(self, grace: float | None = None) -> None:
        """Stop gracefully: no new leases, running handlers get ``grace`` seconds to finish."""
        runner = self._runner
        if runner is None:
            return
        grace = self.grace_period if grace is None else grace
        threads = [threading.Thread(target=d.stop, args=(grace,), daemon=True) for d in self.dispatchers.values()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if self._coordinator is not None:
            self._coordinator.stop()
        if self._storage_maintenance is not None:
            self._storage_maintenance.close()
            self._storage_maintenance = None
        if self._presence is not None:
            self._presence.stop()
            self._presence = None
        runner.shutdown()
        self._runner = None
        log.info("worker stopped")

    def run(self) -> None:
        """Deliver until SIGINT or SIGTERM, then stop gracefully."""

        def on_signal(signum: int, frame: FrameType | None) -> None:
            log.info("received %s: stopping gracefully", signal.Signals(signum).name)
            self._stop.set()

        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.start()
            while not self._stop.wait(0.5):
                pass
        finally:
            self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def drain(self, timeout: float = 30.0) -> bool:
        """Deliver until nothing is deliverable, delayed or in flight, then stop gracefully.

        Returns ``True`` when every consumer's queue ran empty (no message stored: none
        deliverable, delayed or leased, and no batch running), ``False`` if ``timeout`` seconds
        passed first (what is left stays stored, for the next run). A message in a dead letter queue
        counts for that queue only if this app consumes it.

        >>> assert app.drain(timeout=30), "messages were left after 30 s"
        """
        self.start()
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if all(d.idle() for d in self.dispatchers.values()) and all(
                    self.conveyor.engine.metrics(d.queue_id).backlog_count == 0 for d in self.dispatchers.values()
                ):
                    return True
                time.sleep(0.01)
            return False
        finally:
            self.stop()

    @property
    def worker_id(self) -> str | None:
        """This app's id in the worker registry (``conveyor workers list``) while it runs."""
        return self._presence.worker_id if self._presence is not None else None

    def runs(self) -> list[WorkerRun]:
        """What this app runs now, as the worker registry shows it."""
        return [
            WorkerRun(d.queue_id, d.spec.queue, d.spec.script_name, d.spec.settings.max_concurrency, d.concurrency)
            for d in self.dispatchers.values()
        ]

    def concurrency(self, queue: str) -> int:
        """Batches of ``queue`` running right now."""
        dispatcher = self.dispatchers.get(queue)
        return dispatcher.concurrency if dispatcher else 0
