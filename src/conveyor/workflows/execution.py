"""Workflows on the queues: each workflow's internal queue, its wake-up messages, and the push
handler that advances instances.

An instance advances by a message on its workflow's internal queue (``workflow~NAME``: ``~``
cannot appear in a queue name an account chooses, and account listings leave such queues out).
The message body is ``{"id": instance id, "wake": wake time in ms or null}``. The handler claims
the instance under the message's id (fencing every write of the run by the claim's epoch), runs
the function, and acks. A message for an instance that is not due, paused, finished or already
running under another message is acked without running anything, so duplicate and late deliveries
are harmless; a worker killed mid-run loses its lease, the same message comes back, and its claim
takes the run over.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import inspect
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from conveyor import limits, tracing
from conveyor.consumer.batch import MessageBatch, settle_early
from conveyor.engine.base import Engine
from conveyor.errors import QueueExists, QueueNotFound, StorageError
from conveyor.model import NewMessage, QueueSettings
from conveyor.workflows.errors import PayloadTooLarge
from conveyor.workflows.model import Claim, InstanceRow, WorkflowEvent, WorkflowSettings, uuid_shaped
from conveyor.workflows.runtime import (
    AsyncWorkflowStep,
    InstanceFailure,
    Run,
    Suspended,
    WorkflowStep,
    encode_json,
    error_of,
)
from conveyor.workflows.store import WorkflowStore

log = logging.getLogger("conveyor.workflows")

INTERNAL_PREFIX = "workflow~"
# Longer sleeps and waits are reached by a chain of messages, each at most the queues' delay limit.
MAX_WAKE_DELAY_SECONDS = limits.MAX_DELAY_SECONDS
# How long a timer's wake-up that came while its run still held the instance waits for the run's
# suspension (stored milliseconds after the wake-up was sent), polling every SUSPEND_RACE_POLL_SECONDS.
SUSPEND_RACE_SECONDS = 2.0
SUSPEND_RACE_POLL_SECONDS = 0.01


def queue_name(workflow: str) -> str:
    """The internal queue of ``workflow`` (an account-level name)."""
    return f"{INTERNAL_PREFIX}{workflow}"


def ensure_queue(engine: Engine, workflow: str) -> str:
    """The id of the workflow's internal queue, created (retention: the queues' maximum) if missing."""
    name = queue_name(workflow)
    try:
        return engine.get_queue(name).queue_id
    except QueueNotFound:
        pass
    try:
        settings = QueueSettings(message_retention_period=limits.MAX_RETENTION_SECONDS)
        return engine.create_queue(name, settings).queue_id
    except QueueExists:
        return engine.get_queue(name).queue_id


def wake_message(instance_id: str, wake_at_ms: int | None, now_ms: int) -> NewMessage:
    # To the millisecond: a sleep ends when it asked, not at the next whole second.
    delay = 0 if wake_at_ms is None else max(0, wake_at_ms - now_ms) / 1000
    body = json.dumps({"id": instance_id, "wake": wake_at_ms}).encode()
    return NewMessage(body, "json", min(delay, MAX_WAKE_DELAY_SECONDS))


def send_wake(
    engine: Engine, queue_id: str, instance_id: str, wake_at_ms: int | None, *, urgent: bool = False, owed: bool = False
) -> None:
    """Send the instance's wake-up; ``urgent`` for one that a waiting instance needs at once (the
    engine stores it ahead of its other writes), ``owed`` for one the store records as owed until
    it is sent (see ``Engine.enqueue``)."""
    message = wake_message(instance_id, wake_at_ms, engine.clock.now_ms())
    engine.enqueue(queue_id, [message], urgent=urgent, owed=owed)


def version_id(fn: Callable[..., Any], settings: WorkflowSettings) -> str:
    """A hash of the code and the settings, shaped as a UUID (Cloudflare's version ids are)."""
    code = getattr(fn, "__code__", None)
    digest = hashlib.sha256()
    digest.update(f"{fn.__module__}:{fn.__qualname__}".encode())
    if code is not None:
        digest.update(code.co_code)
        digest.update(repr(code.co_consts).encode())
    digest.update(json.dumps(settings.to_json(), sort_keys=True).encode())
    return uuid_shaped(digest.hexdigest())


class WorkflowHandler:
    """The push handler of one workflow's internal queue (batches of one message)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        workflow: str,
        account: str,
        store: WorkflowStore,
        engine: Engine,
        queue_id: str,
        settings: WorkflowSettings,
    ) -> None:
        self.fn = fn
        self.workflow = workflow
        self.account = account
        self.store = store
        self.engine = engine
        self.queue_id = queue_id
        self.settings = settings
        # The consumer's script name is the workflow function's, as for a push consumer.
        self.__module__ = fn.__module__
        self.__qualname__ = fn.__qualname__

    def __call__(self, batch: MessageBatch) -> None:
        for message in batch.messages:
            body = message.body
            if isinstance(body, dict) and isinstance(body.get("id"), str):
                self.advance(body["id"], body.get("wake"), message.id, lambda error: settle_early(batch, error))
            else:
                log.warning("workflow %s: ignored a malformed message %s", self.workflow, message.id)
            message.ack()

    def advance(
        self, instance_id: str, wake: int | None, message_id: str, let_go: Callable[[BaseException | None], None]
    ) -> None:
        """Run the instance for its message, if it is due; ``let_go`` settles the message while a
        run's thread is still busy (see :meth:`Run.hand_on`)."""
        now = self.engine.clock.now_ms()
        claim = self.store.claim(self.account, self.workflow, instance_id, message_id, now)
        if claim is None and wake is not None:
            claim = self._after_suspend(instance_id, message_id)
        if claim is None:
            self._chain(instance_id, wake, self.engine.clock.now_ms())
            return
        run = Run(
            self.store,
            claim,
            self.engine.clock,
            lambda at: send_wake(self.engine, self.queue_id, instance_id, at),
            self.settings.max_steps,
            let_go,
        )
        self._execute(run, claim.instance)

    def _after_suspend(self, instance_id: str, message_id: str) -> Claim | None:
        """A run sends its timer's wake-up (a sleep, a retry's delay, a wait's timeout) just before
        it stores its suspension, so a wake-up due at once can arrive while that run still holds
        the instance: then it is claimed again once the run has let go, for up to
        ``SUSPEND_RACE_SECONDS`` (else it was a stale wake-up of a run that goes on: acked)."""
        deadline = time.monotonic() + SUSPEND_RACE_SECONDS
        while time.monotonic() < deadline:
            row = self.store.get_instance(self.account, self.workflow, instance_id)
            if row is None or row.status not in ("running", "waitingForPause") or row.run_message == message_id:
                break
            time.sleep(SUSPEND_RACE_POLL_SECONDS)
        else:
            return None
        return self.store.claim(self.account, self.workflow, instance_id, message_id, self.engine.clock.now_ms())

    def _chain(self, instance_id: str, wake: int | None, now: int) -> None:
        """A wake-up sent ahead of a sleep longer than the queues' delay limit sends the next link."""
        if wake is None or wake <= now:
            return
        row = self.store.get_instance(self.account, self.workflow, instance_id)
        if row is not None and row.status == "waiting" and row.wake_at_ms == wake:
            send_wake(self.engine, self.queue_id, instance_id, wake)

    def _execute(self, run: Run, row: InstanceRow) -> None:
        event = WorkflowEvent(
            json.loads(row.params),
            _datetime(row.created_ms),
            row.id,
            row.workflow,
            None if row.scheduled_ms is None else _datetime(row.scheduled_ms),
        )
        trace = tracing.TraceContext(row.traceparent or tracing.make(row.trace_id), row.workflow, row.id)
        attributes = {"conveyor.workflow": row.workflow, "conveyor.instance": row.id, "conveyor.epoch": row.epoch}
        with tracing.activate(trace, f"workflow {row.workflow}", attributes):
            self._run_function(run, row, event)

    def _run_function(self, run: Run, row: InstanceRow, event: WorkflowEvent) -> None:
        """One run of the function, in the instance's trace: its end recorded, unless it suspended."""
        status, output, error = "complete", None, None
        try:
            if inspect.iscoroutinefunction(self.fn):
                result = asyncio.run(self.fn(event, AsyncWorkflowStep(run)))
            else:
                result = self.fn(event, WorkflowStep(run))
            output = encode_json(result, "the workflow's output")
        except Suspended:
            return
        except StorageError:
            # The store is unreachable: not the workflow's fault. The handler fails, the message
            # comes back after a pause, and the next delivery takes the run over.
            raise
        except (InstanceFailure, PayloadTooLarge, Exception) as exc:
            status, error = "errored", json.dumps(error_of(exc))
            tracing.mark_error(exc)
            log.info("workflow %s: instance %s errored: %s", self.workflow, row.id, exc)
        now = run.clock.now_ms()
        finished = self.store.finish(
            row.account, row.workflow, row.id, row.epoch, status, output, error, now, run_token=row.run_token
        )
        if not finished:
            log.info("workflow %s: instance %s was taken over; this run's end is not recorded", self.workflow, row.id)


def _datetime(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
