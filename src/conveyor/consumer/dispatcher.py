"""The dispatcher of one push consumer: lease, assemble batches, run them, settle them.

One thread leases and assembles batches; one *keeper* thread renews the leases of everything held
(heartbeat) and fails handlers that run past their time limit (watchdog). A batch is handed to the
handler when it holds ``batch_size`` messages or its first message has waited ``max_wait`` seconds.
With room for several batches, one lease takes the messages of as many (up to ``MAX_LEASE``
messages): a consumer of one message a batch would otherwise pay a lease per message. A batch that
ends while the dispatcher waits for room takes the next one as it settles
(``Engine.settle_and_lease``: one commit where the engine can, instead of a settle, a wake-up and a
lease).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from conveyor import limits
from conveyor.consumer import autoscaler
from conveyor.consumer.autoscaler import Autoscaler
from conveyor.consumer.batch import Message, MessageBatch
from conveyor.consumer.runner import Handler, HandlerRunner, HandlerTimeout, handling
from conveyor.engine.base import Engine
from conveyor.model import ConsumerSettings, DeliveryPolicy, Metrics, StoredMessage

log = logging.getLogger("conveyor.consumer")

# The most messages one lease takes (the queues' batch size limit).
MAX_LEASE = limits.MAX_BATCH_SIZE


def idle_lease_count(batch_size: int, room: int) -> int:
    """How many messages an idle dispatcher leases with room for ``room`` batches of ``batch_size``:
    as many batches' worth as there is room for, up to ``MAX_LEASE`` (at least one batch)."""
    return batch_size * min(max(1, room), max(1, MAX_LEASE // batch_size))


@dataclass(frozen=True, slots=True)
class ConsumerSpec:
    """A push consumer as the decorator declared it."""

    queue: str
    handler: Handler
    settings: ConsumerSettings
    dead_letter_queue: str | None
    handler_timeout: float
    # False for a consumer to which a delivery again is harmless: its settles do not wait for their
    # flush (Engine.settle's ``durable``).
    durable_acks: bool = True

    @property
    def script_name(self) -> str:
        return f"{self.handler.__module__}:{self.handler.__qualname__}"


@dataclass(eq=False)
class Flight:
    """A batch being handled."""

    batch: MessageBatch
    deadline: float
    extended_at: float
    settled: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def claim(self) -> bool:
        """True exactly once: whoever claims the flight settles it."""
        with self.lock:
            if self.settled:
                return False
            self.settled = True
            return True


class Dispatcher:
    def __init__(self, engine: Engine, queue_id: str, spec: ConsumerSpec, runner: HandlerRunner) -> None:
        self.engine = engine
        self.queue_id = queue_id
        self.spec = spec
        self.runner = runner
        self.policy = DeliveryPolicy(spec.settings.max_retries, spec.dead_letter_queue)
        self.scaler = Autoscaler(spec.queue, spec.settings.max_concurrency)
        self._vt = spec.settings.visibility_timeout_ms
        self._max_wait = spec.settings.max_wait_time_ms / 1000
        self._pending: list[StoredMessage] = []
        self._pending_since = 0.0
        self._flights: set[Flight] = set()
        self._lock = threading.Condition()
        self._stopping = threading.Event()
        self._keeper_stop = threading.Event()
        self._paused = False
        # The lease thread waits for room, and no ending batch has yet said it leases for it.
        self._wants_room = False
        self._threads: list[threading.Thread] = []
        self.handled = 0
        self.failures = 0

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> None:
        for target, name in ((self._lease_loop, "lease"), (self._keeper_loop, "keeper")):
            thread = threading.Thread(target=target, name=f"conveyor-{name}-{self.spec.queue}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, grace: float) -> None:
        """Stop leasing, give unstarted messages back, let running handlers finish within ``grace``."""
        self._stopping.set()
        self.engine.wake(self.queue_id)
        with self._lock:
            self._lock.notify_all()
        for thread in self._threads[:1]:
            thread.join()
        with self._lock:
            pending, self._pending = self._pending, []
        if pending:
            self.engine.release(self.queue_id, [m.lease_id for m in pending])
        deadline = time.monotonic() + grace
        with self._lock:
            while self._flights and (left := deadline - time.monotonic()) > 0:
                self._lock.wait(left)
            if self._flights:
                log.warning(
                    "queue %s: %d batches still running after the %.0f s grace period; their messages "
                    "will be delivered again when their leases run out",
                    self.spec.queue,
                    len(self._flights),
                    grace,
                )
        self._keeper_stop.set()
        for thread in self._threads[1:]:
            thread.join()

    def idle(self) -> bool:
        """Nothing held: no batch running, nothing leased and waiting."""
        with self._lock:
            return not self._flights and not self._pending

    @property
    def concurrency(self) -> int:
        return self.scaler.running

    # -- leasing ------------------------------------------------------------------------------
    def _refresh(self) -> None:
        self._paused = self.engine.queue_settings(self.queue_id).delivery_paused

    def _read_metrics(self) -> Metrics:
        return self.engine.metrics(self.queue_id)

    def _lease_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self._step()
            except Exception:
                log.exception("queue %s: dispatcher error; retrying in 1 s", self.spec.queue)
                self._stopping.wait(1.0)

    def _step(self) -> None:
        self._refresh()
        if self._paused:
            self._stopping.wait(self.engine.paused_poll_seconds)
            return
        with self._lock:
            while not self.scaler.has_room() and not self._stopping.is_set():
                self._wants_room = not self._pending
                self._lock.wait(autoscaler.WINDOW_SECONDS)  # the scaler's window may run out of time
            self._wants_room = False
            room = self.scaler.allowed - self.scaler.running
        if self._stopping.is_set():
            return
        size = self.spec.settings.batch_size
        if len(self._pending) >= size:  # a batch leased with others and left for want of room
            leased = []
        elif self._pending:
            leased = self.engine.lease(self.queue_id, size - len(self._pending), self._vt, self.policy)
        else:  # idle: wait for messages (over HTTP, the server holds this one request until they come)
            need = idle_lease_count(size, room)
            wait = self.engine.idle_wait_seconds
            leased = self.engine.lease_waiting(self.queue_id, need, self._vt, self.policy, wait)
        with self._lock:
            if leased and not self._pending:
                self._pending_since = time.monotonic()
            self._pending.extend(leased)
            waited = time.monotonic() - self._pending_since
            launched = False
            while self._pending and (len(self._pending) >= size or waited >= self._max_wait):
                if launched and not self.scaler.has_room():
                    return  # the rest waits for room, as pending
                batch, self._pending = self._pending[:size], self._pending[size:]
                self._launch(batch)
                launched = True
            if launched:
                return
        if self._pending:
            self.engine.wait(self.queue_id, self._max_wait - waited)

    # -- running ------------------------------------------------------------------------------
    def _launch(self, stored: list[StoredMessage]) -> None:
        """Start one batch (called with the lock held)."""
        messages = [
            Message(m.id, m.timestamp_ms, m.body, m.attempts, m.content_type, m.lease_id, m.traceparent) for m in stored
        ]
        now = time.monotonic()
        # The metrics are read if and when the handler asks (MessageBatch): a read here, before the
        # lease, held a woken lease behind its round trip.
        # settle_early(batch, error) settles the flight at once (late-bound: the flight is made next).
        batch = MessageBatch(self.spec.queue, messages, self._read_metrics, lambda error: self._finish(flight, error))
        flight = Flight(batch, now + self.spec.handler_timeout, now)
        self._flights.add(flight)
        self.scaler.started()
        self.runner.submit(
            self.spec.handler,
            flight.batch,
            self.spec.handler_timeout,
            lambda error: self._finish(flight, error),
            handling(self.spec.queue, stored),
        )

    def _finish(self, flight: Flight, error: BaseException | None) -> None:
        if not flight.claim():
            return
        failed = error is not None
        acks, retries, _ = flight.batch.outcome(failed, self.spec.settings.retry_delay)
        if failed:
            kind = "ran past its time limit" if isinstance(error, HandlerTimeout) else "raised"
            # Messages the handler acked before it failed stay acked: count only what is retried.
            log.error(
                "queue %s: handler %s; retrying %d of the batch's %d messages (%d acked before it failed)",
                self.spec.queue,
                kind,
                len(retries),
                len(flight.batch.messages),
                len(acks),
                exc_info=error,
            )
        with self._lock:
            # The room this batch frees, leased as it settles if the lease thread waits for it.
            room = self.scaler.allowed - self.scaler.running + 1
            wanted = self._wants_room and not self._stopping.is_set()
            need = idle_lease_count(self.spec.settings.batch_size, room) if wanted else 0
            self._wants_room = False
        leased: list[StoredMessage] = []
        try:
            result, leased = self.engine.settle_and_lease(
                self.queue_id, acks, retries, self.policy, need, self._vt, durable=self.spec.durable_acks
            )
            for lease, warning in result.warnings.items():
                # Purged, expired or delivered again elsewhere while the handler ran.
                log.warning("queue %s: ack/retry of lease %s changed nothing: %s", self.spec.queue, lease, warning)
        except Exception:
            log.exception("queue %s: could not settle a batch; it will be delivered again", self.spec.queue)
        with self._lock:
            stopping = self._stopping.is_set()  # then stop() may have given back what was pending
            if leased and not stopping:
                if not self._pending:
                    self._pending_since = time.monotonic()
                self._pending.extend(leased)
            self._flights.discard(flight)
            self.handled += len(flight.batch.messages)
            self.failures += failed
            self.scaler.finished(failed)
            self._lock.notify_all()
        if leased and stopping:
            try:
                self.engine.release(self.queue_id, [m.lease_id for m in leased])
            except Exception:
                log.exception(
                    "queue %s: could not give back %d messages; their leases will run out", self.spec.queue, len(leased)
                )

    # -- heartbeat and watchdog ---------------------------------------------------------------
    def _keeper_loop(self) -> None:
        """Renew leases a third of the way into their visibility timeout; fail overdue handlers."""
        renew_after = self._vt / 3000
        interval = min(1.0, renew_after / 2)
        while not self._keeper_stop.wait(interval):
            now = time.monotonic()
            with self._lock:
                flights = list(self._flights)
                held = [m.lease_id for m in self._pending] if now - self._pending_since > renew_after else []
            for flight in flights:
                if now > flight.deadline:
                    timeout = HandlerTimeout(f"handler ran past its time limit of {self.spec.handler_timeout:g} s")
                    self._finish(flight, timeout)
                elif not flight.settled and now - flight.extended_at > renew_after:
                    flight.extended_at = now
                    held.extend(m.lease_id for m in flight.batch.messages)
            if held:
                try:
                    self.engine.extend(self.queue_id, held, self._vt)
                except Exception:
                    log.exception("queue %s: lease heartbeat failed", self.spec.queue)
