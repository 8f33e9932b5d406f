"""``WorkflowStore``: the durable state transitions of workflows, and nothing else.

A store is per deployment and takes the account on every call (the raw, server-side view); the
client facade passes its own account. Arguments and results are plain data
(:mod:`conveyor.workflows.model`), so a store can be reached over HTTP as well as opened on SQLite
or PostgreSQL. Every method is one atomic transaction.

Fencing: :meth:`claim` bumps the instance's ``epoch``, draws a random ``run_token`` and returns
both; every write a run makes (:meth:`save_step`, :meth:`take_event`, :meth:`suspend`,
:meth:`finish`) carries them and changes nothing unless both still match (a claim, a terminate or
a restart since changed them), so a worker that lost its lease can never overwrite a newer run —
even when the claim it ran under was lost in a crash and the same epoch was claimed again.

Instance life cycle::

    queued ──claim──► running ──suspend──► waiting ──(due, or its event)──claim──► running
                         │  └─ pause ─► waitingForPause ──(step boundary)──► paused ──resume──┐
                         └─ finish ─► complete | errored          terminate ─► terminated     │
                                                          restart ─► queued  ◄────────────────┘
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Literal

from conveyor.engine.base import Engine
from conveyor.errors import ConveyorError
from conveyor.workflows.model import (
    Claim,
    CounterChange,
    EventRow,
    InstanceRow,
    NewInstance,
    ScheduleRow,
    StepRow,
    Wakeup,
    WorkflowOverrides,
    WorkflowRecord,
    WorkflowSettings,
    WorkflowVersion,
)

Action = Literal["pause", "resume", "terminate", "restart"]
SuspendOutcome = Literal["waiting", "paused", "event"]


class WorkflowStore(ABC):
    # True for a store in which a step saved with ``durable=False`` is made durable, with every
    # other write before it, by :meth:`sync` (SQLite's log: one flush covers every commit before
    # it). A run then saves its steps so and syncs before what must follow them: its next attempt.
    syncs_later: bool = False

    @abstractmethod
    def sync(self) -> None:
        """Return once every write this store committed before is durable (see ``syncs_later``)."""

    # -- workflows ----------------------------------------------------------------------------
    @abstractmethod
    def put_workflow(
        self, account: str, name: str, settings: WorkflowSettings, version_id: str, now_ms: int
    ) -> WorkflowRecord:
        """Register the code of a workflow (what its worker does when it starts): its settings and
        ``version_id`` (a hash of the code and those settings) as the code's, under the overrides
        a PUT gave (kept); the record made if missing (its created time kept otherwise). A workflow
        whose settings in force have schedules counts its cron ticks from its first registration
        with them (``now_ms``); one without has no schedule row."""

    @abstractmethod
    def put_workflow_overrides(
        self, account: str, name: str, overrides: WorkflowOverrides, now_ms: int
    ) -> WorkflowRecord:
        """``PUT /workflows/{name}``: replace the overrides of the record (made if missing, with no
        code until a worker registers it); the code's own settings are kept; schedules as for
        :meth:`put_workflow`."""

    @abstractmethod
    def get_workflow(self, account: str, name: str) -> WorkflowRecord | None: ...

    @abstractmethod
    def list_workflows(self, account: str) -> list[WorkflowRecord]:
        """The account's workflows, by name."""

    @abstractmethod
    def delete_workflow(self, account: str, name: str) -> bool:
        """Delete the workflow's record, versions and every instance with its steps and events (the
        instance ids stay taken); False if there is no such workflow."""

    @abstractmethod
    def list_versions(self, account: str, workflow: str) -> list[WorkflowVersion]:
        """Every version the workflow had, the one last put in force first."""

    @abstractmethod
    def get_version(self, account: str, workflow: str, version_id: str) -> WorkflowVersion | None: ...

    @abstractmethod
    def instance_counts(
        self, account: str, workflow: str, *, start_ms: int | None = None, end_ms: int | None = None
    ) -> dict[str, int]:
        """How many instances the workflow has in each status (statuses it has none in left out),
        of those created from ``start_ms`` to ``end_ms`` when given."""

    # -- instances ----------------------------------------------------------------------------
    @abstractmethod
    def create_instances(
        self,
        account: str,
        workflow: str,
        version_id: str,
        items: Sequence[NewInstance],
        now_ms: int,
        atomic: bool = False,
    ) -> list[InstanceRow | ConveyorError]:
        """Store ``items`` as ``queued`` instances; per item the new row, or ``InstanceExists`` for an
        id this workflow has ever had (ids are never reused, even after delete). ``atomic``: raise
        that ``InstanceExists`` instead, storing none of them."""

    @abstractmethod
    def get_instance(self, account: str, workflow: str, instance_id: str) -> InstanceRow | None: ...

    @abstractmethod
    def list_instances(
        self,
        account: str,
        workflow: str,
        *,
        status: str | None,
        start_ms: int | None,
        end_ms: int | None,
        after: tuple[int, str] | None,
        limit: int,
        descending: bool,
    ) -> list[InstanceRow]:
        """Instances ordered by (created, id), after the ``after`` position, filtered."""

    @abstractmethod
    def instances_by_trace(self, account: str, trace_id: str, limit: int) -> list[InstanceRow]:
        """The account's instances (of every workflow) of the trace ``trace_id``, oldest first."""

    @abstractmethod
    def steps(self, account: str, workflow: str, instance_id: str) -> list[StepRow]:
        """Every step of an instance, in order."""

    @abstractmethod
    def delete_instance(self, account: str, workflow: str, instance_id: str) -> bool:
        """Delete an instance with its steps and events (its id stays taken); False if none."""

    @abstractmethod
    def add_event(
        self, account: str, workflow: str, instance_id: str, type: str, payload: str, now_ms: int
    ) -> InstanceRow:
        """Buffer an event for the instance's waits of ``type`` (FIFO); returns the instance, so the
        caller wakes it if it waits for that type. ``InstanceNotFound``; ``InvalidInstanceState``
        if it has finished."""

    @abstractmethod
    def change_status(
        self, account: str, workflow: str, instance_id: str, action: Action, now_ms: int, from_step: str | None = None
    ) -> InstanceRow:
        """Pause, resume, terminate or restart (from the step with key ``from_step``, keeping the
        steps before it; all when None); returns the instance after. ``InvalidInstanceState`` when
        the status does not allow the action, ``InvalidStepConfig`` for an unknown ``from_step``."""

    # -- runs (all but claim fenced by the epoch and the run token) --------------------------------------------
    @abstractmethod
    def claim(self, account: str, workflow: str, instance_id: str, message_id: str, now_ms: int) -> Claim | None:
        """Start a run driven by queue message ``message_id``, or None when there is nothing to run:
        the instance is gone, finished, paused, not due, or running under another message. A run
        under the same message is taken over (that message's previous lease ran out). A waiting
        instance whose event has come has it taken into its wait's step by the claim (the step
        returned complete), as :meth:`take_event` would at the run's start."""

    @abstractmethod
    def save_step(
        self,
        account: str,
        workflow: str,
        instance_id: str,
        epoch: int,
        step: StepRow,
        *,
        run_token: str | None,
        durable: bool = True,
    ) -> str | None:
        """Store a step (insert or replace by key); the instance's status, or None if fenced.
        ``durable=False`` (an attempt's start, only informative) may be lost in a crash but is never
        applied after a later durable write."""

    @abstractmethod
    def take_event(
        self,
        account: str,
        workflow: str,
        instance_id: str,
        epoch: int,
        step: StepRow,
        type: str,
        *,
        run_token: str | None,
    ) -> tuple[bool, EventRow | None]:
        """Consume the oldest buffered event of ``type`` into ``step`` (stored complete with the
        event as its output). ``(False, None)`` if fenced; ``(True, None)`` if none is buffered."""

    @abstractmethod
    def suspend(
        self,
        account: str,
        workflow: str,
        instance_id: str,
        epoch: int,
        wake_at_ms: int,
        waiting_for: str | None,
        now_ms: int,
        *,
        run_token: str | None,
    ) -> SuspendOutcome | None:
        """End the run until ``wake_at_ms`` (or an event of ``waiting_for``): ``waiting``;
        ``paused`` if a pause was asked for; ``event`` (nothing changed) when an event of
        ``waiting_for`` is already buffered; None if fenced."""

    @abstractmethod
    def finish(
        self,
        account: str,
        workflow: str,
        instance_id: str,
        epoch: int,
        status: str,
        output: str | None,
        error: str | None,
        now_ms: int,
        *,
        run_token: str | None,
    ) -> bool:
        """End the instance ``complete`` or ``errored``; False if fenced."""

    # -- counters (conveyor.Counter) ----------------------------------------------------------
    @abstractmethod
    def counter_add(self, account: str, counter: str, n: int, key: str | None, now_ms: int) -> CounterChange:
        """Add ``n`` to the counter (made at 0 if missing) unless an add with ``key`` was applied
        to it already (then nothing changes); the value after. When the value is zero, each notice
        not yet sent is sent now, in this transaction: its event buffered for its instance (one
        not finished) and a wake-up owed (:meth:`wakeups_sent` once the message is sent).
        ``InvalidRequest`` if the value would leave ±2^53."""

    @abstractmethod
    def counter_value(self, account: str, counter: str) -> int:
        """The counter's value (0 for one never added to)."""

    @abstractmethod
    def counter_notify(
        self, account: str, counter: str, workflow: str, instance_id: str, event_type: str, now_ms: int
    ) -> CounterChange:
        """Register a notice: send ``event_type`` to the instance once, when the counter is zero
        (now, if it is zero now). Registering a notice again changes nothing, sent or not.
        ``InstanceNotFound`` if there is no such instance."""

    @abstractmethod
    def counter_delete(self, account: str, counter: str) -> bool:
        """Delete the counter with its add keys and notices; False if it had none of them."""

    @abstractmethod
    def wakeups_sent(self, account: str, seqs: list[int]) -> None:
        """Forget owed wake-ups whose messages were sent."""

    def internal_queue(self, account: str, workflow: str, engine: Engine) -> str:
        """The id of ``workflow``'s internal queue, made if missing; ``engine`` is the account's
        (a store behind a server asks the server, since no tenant may name such a queue)."""
        from conveyor.workflows.execution import ensure_queue

        return ensure_queue(engine, workflow)

    # -- maintenance --------------------------------------------------------------------------
    @abstractmethod
    def prune(self, now_ms: int) -> int:
        """Delete finished instances past their workflow's retention (every account); the count."""

    @abstractmethod
    def overdue(self, before_ms: int, limit: int) -> list[InstanceRow]:
        """Instances (every account) that should have been advanced by ``before_ms``: waiting with
        a wake time before it, queued since before it, or running without a change since then."""

    @abstractmethod
    def requeue_orphan(self, account: str, workflow: str, instance_id: str, epoch: int, now_ms: int) -> bool:
        """Make a run that no message drives any more ``queued`` again (its epoch fenced), if it is
        still at ``epoch``; ``waitingForPause`` becomes ``paused``. True if it should be woken."""

    @abstractmethod
    def owed_wakeups(self, before_ms: int, limit: int) -> list[Wakeup]:
        """Wake-ups (every account) owed since before ``before_ms``: their writer died before it
        sent them."""

    @abstractmethod
    def schedules(self) -> list[ScheduleRow]:
        """Every workflow (every account) with cron schedules, and the last tick it started."""

    @abstractmethod
    def start_tick(
        self, account: str, workflow: str, tick_ms: int, instance: NewInstance, now_ms: int
    ) -> InstanceRow | None:
        """Start the cron tick ``tick_ms``: in one transaction, move the workflow's last tick to it
        and create ``instance`` (``queued``, ``scheduled_ms`` the tick, params null). None, and
        nothing changed, if the workflow's last tick is already that late (another coordinator
        started it) or it has no schedules."""

    @abstractmethod
    def close(self) -> None: ...
