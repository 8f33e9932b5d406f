"""The :class:`WorkflowStore` on SQL: one implementation of the transitions, over a database
(SQLite or PostgreSQL) that runs named queries from its own ``.sql`` file.

Every mutation first reads the instance row with ``lock_instance`` (``FOR UPDATE`` on PostgreSQL;
SQLite's ``BEGIN IMMEDIATE`` already serializes writers), decides in Python, and writes the whole
row back with ``update_instance``: the rules live in one place and both engines run them alike.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from conveyor.errors import ConveyorError, InvalidRequest
from conveyor.workflows.errors import InstanceExists, InstanceNotFound, InvalidInstanceState, InvalidStepConfig
from conveyor.workflows.model import (
    FINISHED,
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
    effective_version,
)
from conveyor.workflows.store import Action, SuspendOutcome, WorkflowStore

T = TypeVar("T")
Row = tuple[Any, ...]
INSTANCE_FIELDS = [f.name for f in dataclasses.fields(InstanceRow)]
# A counter's value stays a whole number that JSON (and JavaScript) carries exactly.
MAX_COUNTER = 2**53


class Tx(Protocol):
    """One transaction's statements. ``rows`` and ``run`` answer at once; ``send`` is a write
    whose row count nobody reads and ``rows_each`` several reads in order, which a database
    across a network (PostgreSQL) sends together with the statement that next needs an answer
    (or the commit): one round trip for them all. A write sent so that fails fails the
    transaction all the same, at that next statement."""

    def rows(self, query: str, params: Mapping[str, Any]) -> list[Row]: ...
    def run(self, query: str, params: Mapping[str, Any]) -> int: ...
    def send(self, query: str, params: Mapping[str, Any]) -> None: ...
    def rows_each(self, statements: Sequence[tuple[str, Mapping[str, Any]]]) -> list[list[Row]]: ...


class Database(Protocol):
    """A connection to one engine's tables: ``transaction(fn)`` runs ``fn(tx)`` atomically,
    retrying it whole through transient failures."""

    # True when the database commits the transactions of concurrent callers in groups itself.
    groups_commits: bool
    # False when a claim may commit without waiting for its flush (see SqliteDatabase).
    claims_durable: bool
    # True when one flush (:meth:`sync`) makes every earlier commit durable, volatile ones too.
    syncs_later: bool

    def transaction(self, fn: Callable[[Tx], T], *, durable: bool = True, urgent: bool = False) -> T:
        """``durable=False``: the commit may be lost in a crash, but never reordered after a
        later durable one (what a record that is only informative needs). ``urgent``: a
        database that groups commits serves it before the writes queued with it (a claim)."""
        ...

    def read(self, fn: Callable[[Tx], T]) -> T:
        """``fn``, which only reads: it takes no write lock where the database has one, and waits
        for no flush."""
        ...

    def sync(self) -> None:
        """Return once every transaction committed before is durable (``syncs_later``; else a no-op)."""
        ...

    def close(self) -> None: ...


def _goes_on(status: str, at_epoch: int, epoch: int) -> bool:
    """Whether a run at ``epoch`` goes on in an instance whose row says ``status`` and ``at_epoch``
    (the rule of :meth:`SqlWorkflowStore._at_epoch`, and with the run token of ``_fenced``; the
    ``finish_instance`` statement states it in SQL)."""
    return at_epoch == epoch and status in ("running", "waitingForPause")


def _instance(row: Row) -> InstanceRow:
    return InstanceRow(*row)


def _step(row: Row) -> StepRow:
    return StepRow(*row)


def _record(row: Row) -> WorkflowRecord:
    account, name, settings, version_id, created, modified, code_settings, overrides, code_version = row
    return WorkflowRecord(
        account,
        name,
        WorkflowSettings.from_json(json.loads(settings)),
        version_id,
        created,
        modified,
        None if code_settings is None else WorkflowSettings.from_json(json.loads(code_settings)),
        WorkflowOverrides.from_json(json.loads(overrides)),
        code_version,
    )


def _version(row: Row) -> WorkflowVersion:
    version_id, workflow, settings, class_name, script_name, has_code, created, modified = row
    return WorkflowVersion(
        version_id,
        workflow,
        WorkflowSettings.from_json(json.loads(settings)),
        class_name,
        script_name,
        bool(has_code),
        created,
        modified,
    )


@dataclasses.dataclass(eq=False)
class _Add:
    """One caller's add to a counter, waiting to be applied with its group."""

    n: int
    key: str | None
    now_ms: int
    done: bool = False
    change: CounterChange | None = None
    error: BaseException | None = None


class SqlWorkflowStore(WorkflowStore):
    def __init__(self, db: Database, queries: Mapping[str, str]) -> None:
        self._db = db
        self.syncs_later = db.syncs_later
        self._q = queries
        self._adds: dict[tuple[str, str], list[_Add]] = {}
        self._adds_lock = threading.Lock()
        self._add_locks = [threading.Lock() for _ in range(64)]  # by counter, striped

    def _rows(self, tx: Tx, query: str, /, **params: Any) -> list[Row]:
        return tx.rows(self._q[query], params)

    def _run(self, tx: Tx, query: str, /, **params: Any) -> int:
        return tx.run(self._q[query], params)

    def _read(self, query: str, /, **params: Any) -> list[Row]:
        """The rows of one query, read beside the writers (``Database.read``)."""
        return self._db.read(lambda tx: self._rows(tx, query, **params))

    def _send(self, tx: Tx, query: str, /, **params: Any) -> None:
        tx.send(self._q[query], params)

    def _lock(self, tx: Tx, account: str, workflow: str, instance_id: str) -> InstanceRow | None:
        rows = self._rows(tx, "lock_instance", account=account, workflow=workflow, id=instance_id)
        return _instance(rows[0]) if rows else None

    def _write(self, tx: Tx, row: InstanceRow) -> InstanceRow:
        # Rows are flat (text and numbers), so their fields are passed as they are: asdict's deep
        # copy was a tenth of a no-op run's CPU.
        self._send(tx, "update_instance", **vars(row))
        return row

    def _at_epoch(self, tx: Tx, account: str, workflow: str, instance_id: str, epoch: int) -> InstanceRow | None:
        """The instance's row, locked, if a run at ``epoch`` goes on."""
        row = self._lock(tx, account, workflow, instance_id)
        return row if row is not None and _goes_on(row.status, row.epoch, epoch) else None

    def _fenced(
        self, tx: Tx, account: str, workflow: str, instance_id: str, epoch: int, run_token: str | None
    ) -> InstanceRow | None:
        """The row, locked, if the run that claimed ``(epoch, run_token)`` still owns it (see
        :meth:`claim` for why the token as well as the epoch)."""
        row = self._at_epoch(tx, account, workflow, instance_id, epoch)
        return row if row is not None and row.run_token == run_token else None

    def _owner_status(
        self, tx: Tx, account: str, workflow: str, instance_id: str, epoch: int, run_token: str | None
    ) -> str | None:
        """What :meth:`_fenced` decides, as the instance's status (its row locked), without reading
        the whole row: a step's write needs no more, and the params can be a mebibyte."""
        rows = self._rows(tx, "fence_instance", account=account, workflow=workflow, id=instance_id)
        if not rows:
            return None
        status, at_epoch, token = rows[0]
        return str(status) if _goes_on(status, at_epoch, epoch) and token == run_token else None

    # -- workflows ----------------------------------------------------------------------------
    def put_workflow(
        self, account: str, name: str, settings: WorkflowSettings, version_id: str, now_ms: int
    ) -> WorkflowRecord:
        def put(tx: Tx) -> WorkflowRecord:
            code = json.dumps(settings.to_json())
            self._send(
                tx, "upsert_workflow_code", account=account, name=name, code_settings=code, code_version=version_id,
                now=now_ms,
            )  # fmt: skip
            return self._put_in_force(tx, account, name, now_ms)

        return self._db.transaction(put)

    def put_workflow_overrides(
        self, account: str, name: str, overrides: WorkflowOverrides, now_ms: int
    ) -> WorkflowRecord:
        def put(tx: Tx) -> WorkflowRecord:
            given = json.dumps(overrides.to_json())
            placeholder = json.dumps(WorkflowSettings().to_json())  # set by _put_in_force below
            self._send(
                tx, "upsert_workflow_overrides", account=account, name=name, overrides=given, settings=placeholder,
                now=now_ms,
            )  # fmt: skip
            return self._put_in_force(tx, account, name, now_ms)

        return self._db.transaction(put)

    def _put_in_force(self, tx: Tx, account: str, name: str, now_ms: int) -> WorkflowRecord:
        """Once one half (the code's, a PUT's) was written: the settings and version in force."""
        before = _record(self._rows(tx, "lock_workflow", account=account, name=name)[0])
        settings = before.overrides.apply(before.code_settings or WorkflowSettings())
        version = effective_version(before.code_version, before.overrides)
        self._send(
            tx,
            "set_workflow_in_force",
            account=account,
            name=name,
            settings=json.dumps(settings.to_json()),
            version_id=version,
            success_retention_ms=settings.success_retention_ms,
            error_retention_ms=settings.error_retention_ms,
        )
        record = dataclasses.replace(before, settings=settings, version_id=version)
        if settings.schedules:
            self._send(tx, "put_schedule", account=account, workflow=name, now=now_ms)
        else:
            self._send(tx, "drop_schedule", account=account, workflow=name)
        if version != before.version_id:
            self._send(
                tx,
                "put_version",
                account=account,
                workflow=name,
                id=version,
                settings=json.dumps(settings.to_json()),
                class_name=record.class_name,
                script_name=record.script_name,
                has_code=record.code_settings is not None,
                now=now_ms,
            )
        return record

    def get_workflow(self, account: str, name: str) -> WorkflowRecord | None:
        rows = self._read("get_workflow", account=account, name=name)
        return _record(rows[0]) if rows else None

    def list_workflows(self, account: str) -> list[WorkflowRecord]:
        rows = self._read("list_workflows", account=account)
        return [_record(r) for r in rows]

    def delete_workflow(self, account: str, name: str) -> bool:
        def delete(tx: Tx) -> bool:
            key = {"account": account, "workflow": name}
            for query in ("delete_workflow_steps", "delete_workflow_events", "delete_workflow_instances"):
                self._send(tx, query, **key)
            self._send(tx, "delete_workflow_versions", **key)
            self._send(tx, "drop_schedule", **key)
            return self._run(tx, "delete_workflow", account=account, name=name) > 0

        return self._db.transaction(delete)

    def list_versions(self, account: str, workflow: str) -> list[WorkflowVersion]:
        rows = self._read("list_versions", account=account, workflow=workflow)
        return [_version(r) for r in rows]

    def get_version(self, account: str, workflow: str, version_id: str) -> WorkflowVersion | None:
        rows = self._read("get_version", account=account, workflow=workflow, id=version_id)
        return _version(rows[0]) if rows else None

    def instance_counts(
        self, account: str, workflow: str, *, start_ms: int | None = None, end_ms: int | None = None
    ) -> dict[str, int]:
        rows = self._read("instance_counts", account=account, workflow=workflow, start_ms=start_ms, end_ms=end_ms)
        return {status: int(count) for status, count in rows}

    # -- instances ----------------------------------------------------------------------------
    def create_instances(
        self,
        account: str,
        workflow: str,
        version_id: str,
        items: Sequence[NewInstance],
        now_ms: int,
        atomic: bool = False,
    ) -> list[InstanceRow | ConveyorError]:
        def create(tx: Tx) -> list[InstanceRow | ConveyorError]:
            made = [self._insert(tx, account, workflow, version_id, item, now_ms, None) for item in items]
            refused = next((r for r in made if isinstance(r, ConveyorError)), None)
            if atomic and refused is not None:
                raise refused  # the transaction is rolled back: none of the batch is stored
            return made

        return self._db.transaction(create)

    def _insert(
        self,
        tx: Tx,
        account: str,
        workflow: str,
        version_id: str,
        item: NewInstance,
        now_ms: int,
        scheduled_ms: int | None,
    ) -> InstanceRow | ConveyorError:
        key = {"account": account, "workflow": workflow, "id": item.id}
        if self._rows(tx, "instance_id_taken", **key):
            return InstanceExists(
                f"instance.already_exists: workflow {workflow!r} already had an instance {item.id!r}; "
                "ids are never reused"
            )
        self._send(tx, "take_instance_id", **key)
        row = InstanceRow(
            account,
            workflow,
            item.id,
            "queued",
            item.params,
            None,
            None,
            item.trace_id,
            version_id,
            0,
            None,
            None,
            None,
            None,
            None,
            now_ms,
            now_ms,
            None,
            None,
            scheduled_ms,
            item.traceparent,
            item.origin,
        )
        self._send(tx, "insert_instance", **vars(row))
        return row

    def get_instance(self, account: str, workflow: str, instance_id: str) -> InstanceRow | None:
        rows = self._read("get_instance", account=account, workflow=workflow, id=instance_id)
        return _instance(rows[0]) if rows else None

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
        far = (None, None) if after is None else after
        params = {
            "account": account,
            "workflow": workflow,
            "status": status,
            "start_ms": start_ms,
            "end_ms": end_ms,
            "after_ms": far[0],
            "after_id": far[1],
            "limit": limit,
        }
        query = ("list_instances_of_status_" if status is not None else "list_instances_") + (
            "desc" if descending else "asc"
        )
        rows = self._read(query, **params)
        return [_instance(r) for r in rows]

    def instances_by_trace(self, account: str, trace_id: str, limit: int) -> list[InstanceRow]:
        rows = self._read("instances_by_trace", account=account, trace_id=trace_id, limit=limit)
        return [_instance(r) for r in rows]

    def steps(self, account: str, workflow: str, instance_id: str) -> list[StepRow]:
        rows = self._read("steps", account=account, workflow=workflow, id=instance_id)
        return [_step(r) for r in rows]

    def delete_instance(self, account: str, workflow: str, instance_id: str) -> bool:
        def delete(tx: Tx) -> bool:
            key = {"account": account, "workflow": workflow, "id": instance_id}
            self._send(tx, "delete_steps", **key)
            self._send(tx, "delete_events", **key)
            return self._run(tx, "delete_instance", **key) > 0

        return self._db.transaction(delete)

    def add_event(
        self, account: str, workflow: str, instance_id: str, type: str, payload: str, now_ms: int
    ) -> InstanceRow:
        def add(tx: Tx) -> InstanceRow:
            row = self._lock(tx, account, workflow, instance_id)
            if row is None:
                raise InstanceNotFound(f"workflow {workflow!r} has no instance {instance_id!r}")
            if row.status in FINISHED:
                raise InvalidInstanceState(f"instance {instance_id!r} is {row.status}; it takes no more events")
            self._send(
                tx,
                "insert_event",
                account=account,
                workflow=workflow,
                id=instance_id,
                type=type,
                payload=payload,
                now=now_ms,
            )
            return row

        return self._db.transaction(add)

    def change_status(
        self, account: str, workflow: str, instance_id: str, action: Action, now_ms: int, from_step: str | None = None
    ) -> InstanceRow:
        def change(tx: Tx) -> InstanceRow:
            row = self._lock(tx, account, workflow, instance_id)
            if row is None:
                raise InstanceNotFound(f"workflow {workflow!r} has no instance {instance_id!r}")
            return self._write(tx, self._changed(tx, row, action, now_ms, from_step))

        return self._db.transaction(change)

    def _changed(self, tx: Tx, row: InstanceRow, action: Action, now: int, from_step: str | None) -> InstanceRow:
        change = dataclasses.replace
        if action == "restart":
            key = {"account": row.account, "workflow": row.workflow, "id": row.id}
            seq = 0
            if from_step is not None:
                found = self._rows(tx, "step_seq", **key, key=from_step)
                if not found:
                    raise InvalidStepConfig(f"instance {row.id!r} has no step {from_step!r} to restart from")
                seq = found[0][0]
            self._send(tx, "unconsume_events_from", **key, seq=seq)
            self._send(tx, "delete_steps_from", **key, seq=seq)
            return change(
                row,
                status="queued",
                epoch=row.epoch + 1,
                output=None,
                error=None,
                run_message=None,
                wake_at_ms=None,
                waiting_for=None,
                paused_at_ms=None,
                resume_status=None,
                ended_ms=None,
                modified_ms=now,
            )
        if row.status in FINISHED:
            raise InvalidInstanceState(f"instance {row.id!r} is {row.status}; it cannot {action}")
        if action == "terminate":
            return change(
                row, status="terminated", epoch=row.epoch + 1, run_message=None, ended_ms=now, modified_ms=now
            )
        if action == "pause":
            if row.status in ("paused", "waitingForPause"):
                raise InvalidInstanceState(f"instance {row.id!r} is already {row.status}")
            if row.status == "running":
                return change(row, status="waitingForPause", modified_ms=now)
            return change(row, status="paused", paused_at_ms=now, resume_status=row.status, modified_ms=now)
        if row.status == "waitingForPause":
            return change(row, status="running", modified_ms=now)
        if row.status != "paused":
            raise InvalidInstanceState(f"instance {row.id!r} is {row.status}, not paused; there is nothing to resume")
        paused_for = now - (row.paused_at_ms or now)
        wake = None if row.wake_at_ms is None else row.wake_at_ms + paused_for
        return change(
            row,
            status=row.resume_status or "queued",
            wake_at_ms=wake,
            paused_at_ms=None,
            resume_status=None,
            modified_ms=now,
        )

    # -- runs ---------------------------------------------------------------------------------
    def claim(self, account: str, workflow: str, instance_id: str, message_id: str, now_ms: int) -> Claim | None:
        """The claim is the wake-up path's one commit, so a database may make it without waiting
        for its flush (``claims_durable=False``). That is safe because a run's writes are fenced by
        the claim's epoch *and* a random token drawn here (``run_token``, 128 bits), checked on the
        locked row:

        - the log keeps commits in order, and every write a run makes that is meant to last (a
          step's result, its suspension, its end) waits for its own flush, which covers the claim
          committed before it. A claim lost in a crash was therefore followed by no lasting write
          of its run, only by volatile ones lost with it, and the run's effects outside the store
          are a step's attempt, which runs again (at least once, as after a worker's death);
        - the crash may take the database alone (the server restarts, the worker runs on): the
          row is back at the epoch before the claim, and the message (its lease lost too) is
          delivered again and claimed at the *same* epoch. The first run's writes then find the
          epoch theirs but not the token (one draw in 2^128 would match), and are refused, as
          they are before that claim (the row's epoch is then the one before). So a run whose
          claim was lost can never write beside the run that claimed after it.

        A claim that pauses the instance instead is made durable at once (:meth:`_flush_claim`):
        no run follows whose first write would flush it, and its message is acked next."""
        paused = False

        def claim(tx: Tx) -> Claim | None:
            nonlocal paused
            # What the claim decides on, read together (one round trip on PostgreSQL): the row,
            # locked first, then its steps and the oldest unused event of the type it waits for.
            key = {"account": account, "workflow": workflow, "id": instance_id}
            locked, stored, awaited = tx.rows_each(
                [(self._q[query], key) for query in ("lock_instance", "steps", "awaited_event")]
            )
            if not locked:
                return None
            row = _instance(locked[0])
            if row.status in ("running", "waitingForPause"):
                if row.run_message != message_id:
                    return None  # another message's run goes on; this one is a duplicate
                if row.status == "waitingForPause":
                    self._write(
                        tx,
                        dataclasses.replace(
                            row,
                            status="paused",
                            paused_at_ms=now_ms,
                            resume_status="waiting",
                            wake_at_ms=now_ms,
                            run_message=None,
                            modified_ms=now_ms,
                        ),
                    )
                    paused = True
                    return None
            elif row.status == "waiting":
                due = row.wake_at_ms is None or row.wake_at_ms <= now_ms
                if not due and not (row.waiting_for is not None and awaited):
                    return None
            elif row.status != "queued":
                return None
            claimed = dataclasses.replace(
                row,
                status="running",
                epoch=row.epoch + 1,
                run_message=message_id,
                wake_at_ms=None,
                waiting_for=None,
                started_ms=row.started_ms or now_ms,
                modified_ms=now_ms,
                run_token=secrets.token_hex(16),
            )
            self._write(tx, claimed)
            steps = [_step(r) for r in stored]
            if row.status == "waiting" and row.waiting_for is not None:
                steps = self._take_awaited(tx, claimed, steps, row.waiting_for, awaited, now_ms)
            elif row.status == "waiting":
                steps = self._end_due_sleep(tx, claimed, steps, now_ms)
            return Claim(claimed, steps)

        claimed = self._db.transaction(claim, urgent=True, durable=self._db.claims_durable)
        if paused and not self._db.claims_durable:
            self._flush_claim(account, workflow, instance_id)
        return claimed

    def _flush_claim(self, account: str, workflow: str, instance_id: str) -> None:
        """Make a claim committed without its flush durable: a durable transaction that writes
        the instance's row as it is (PostgreSQL flushes the log only for a transaction that wrote
        something; its flush covers every commit before it)."""

        def rewrite(tx: Tx) -> None:
            row = self._lock(tx, account, workflow, instance_id)
            if row is not None:
                self._write(tx, row)

        self._db.transaction(rewrite)

    def _take_awaited(
        self, tx: Tx, row: InstanceRow, steps: list[StepRow], type: str, found: list[Row], now_ms: int
    ) -> list[StepRow]:
        """A run woken for the event its wait waits for would begin by taking it: taken here, in
        the claim's transaction (the wake path's one write fewer), its step stored complete as
        :meth:`take_event` stores it; the run then finds the wait done. ``found``: the oldest
        unused event of ``type`` (the claim read it with the row)."""
        waits = [s for s in steps if s.type == "waitForEvent" and s.status == "running"]
        if not waits or json.loads(waits[-1].config).get("type") != type or not found:
            return steps
        seq, payload, timestamp = found[0]
        wait = waits[-1]
        self._send(tx, "consume_event", seq=seq, step_key=wait.key)
        output = json.dumps({"type": type, "payload": json.loads(payload), "timestamp": timestamp})
        done = dataclasses.replace(wait, status="complete", output=output, end_ms=now_ms)
        self._put_step(tx, row, done)
        return [done if s.key == wait.key else s for s in steps]

    def _end_due_sleep(self, tx: Tx, row: InstanceRow, steps: list[StepRow], now_ms: int) -> list[StepRow]:
        """A run woken when its sleep is over would begin by storing the sleep complete: stored
        here, in the claim's transaction (a wake-up's one write fewer), as the run stores it."""
        sleeps = [s for s in steps if s.type == "sleep" and s.status == "running"]
        if not sleeps or json.loads(sleeps[-1].config)["until"] > now_ms:
            return steps
        done = dataclasses.replace(sleeps[-1], status="complete", end_ms=now_ms)
        self._put_step(tx, row, done)
        return [done if s.key == done.key else s for s in steps]

    def _has_event(self, tx: Tx, row: InstanceRow, type: str) -> bool:
        return bool(self._rows(tx, "oldest_event", account=row.account, workflow=row.workflow, id=row.id, type=type))

    def _put_step(self, tx: Tx, row: InstanceRow, step: StepRow) -> None:
        self._send(tx, "put_step", account=row.account, workflow=row.workflow, instance=row.id, **vars(step))

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
        def save(tx: Tx) -> str | None:
            status = self._owner_status(tx, account, workflow, instance_id, epoch, run_token)
            if status is not None:
                self._send(tx, "put_step", account=account, workflow=workflow, instance=instance_id, **vars(step))
            return status

        return self._db.transaction(save, durable=durable)

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
        def take(tx: Tx) -> tuple[bool, EventRow | None]:
            row = self._fenced(tx, account, workflow, instance_id, epoch, run_token)
            if row is None:
                return False, None
            found = self._rows(tx, "oldest_event", account=account, workflow=workflow, id=instance_id, type=type)
            if not found:
                return True, None
            seq, payload, timestamp = found[0]
            self._send(tx, "consume_event", seq=seq, step_key=step.key)
            event = EventRow(type, payload, timestamp)
            output = json.dumps({"type": type, "payload": json.loads(payload), "timestamp": timestamp})
            self._put_step(tx, row, dataclasses.replace(step, status="complete", output=output))
            return True, event

        return self._db.transaction(take)

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
        def suspend(tx: Tx) -> SuspendOutcome | None:
            row = self._fenced(tx, account, workflow, instance_id, epoch, run_token)
            if row is None:
                return None
            if waiting_for is not None and self._has_event(tx, row, waiting_for):
                return "event"
            change = dataclasses.replace
            if row.status == "waitingForPause":
                self._write(
                    tx,
                    change(
                        row,
                        status="paused",
                        paused_at_ms=now_ms,
                        resume_status="waiting",
                        wake_at_ms=wake_at_ms,
                        waiting_for=waiting_for,
                        run_message=None,
                        modified_ms=now_ms,
                    ),
                )
                return "paused"
            self._write(
                tx,
                change(
                    row,
                    status="waiting",
                    wake_at_ms=wake_at_ms,
                    waiting_for=waiting_for,
                    run_message=None,
                    modified_ms=now_ms,
                ),
            )
            return "waiting"

        return self._db.transaction(suspend)

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
        def finish(tx: Tx) -> bool:
            # The rule of _fenced (and _goes_on), in the statement's WHERE.
            key = {"account": account, "workflow": workflow, "id": instance_id}
            ended = {"status": status, "output": output, "error": error, "now": now_ms}
            return self._run(tx, "finish_instance", **key, **ended, epoch=epoch, run_token=run_token) == 1

        return self._db.transaction(finish)

    def prune(self, now_ms: int) -> int:
        def prune(tx: Tx) -> int:
            expired = self._rows(tx, "expired_instances", now=now_ms)
            for account, workflow, instance_id in expired:
                key = {"account": account, "workflow": workflow, "id": instance_id}
                self._send(tx, "delete_steps", **key)
                self._send(tx, "delete_events", **key)
                self._send(tx, "delete_instance", **key)
            return len(expired)

        return self._db.transaction(prune)

    def overdue(self, before_ms: int, limit: int) -> list[InstanceRow]:
        rows = self._read("overdue_instances", before=before_ms, limit=limit)
        return [_instance(r) for r in rows]

    def requeue_orphan(self, account: str, workflow: str, instance_id: str, epoch: int, now_ms: int) -> bool:
        def requeue(tx: Tx) -> bool:
            row = self._at_epoch(tx, account, workflow, instance_id, epoch)
            if row is None:
                return False
            change = dataclasses.replace
            if row.status == "waitingForPause":
                paused = change(
                    row, status="paused", paused_at_ms=now_ms, resume_status="waiting", wake_at_ms=now_ms,
                    epoch=row.epoch + 1, run_message=None, modified_ms=now_ms,
                )  # fmt: skip
                self._write(tx, paused)
                return False
            self._write(tx, change(row, status="queued", epoch=row.epoch + 1, run_message=None, modified_ms=now_ms))
            return True

        return self._db.transaction(requeue)

    # -- counters -----------------------------------------------------------------------------
    def counter_add(self, account: str, counter: str, n: int, key: str | None, now_ms: int) -> CounterChange:
        # Every add of a counter takes its row's lock until its commit is flushed, so on PostgreSQL
        # a burst of adds (a thousand children counting down) would run one flush each, in turn.
        # The adds of one counter that wait while a group commits run next as one group: one
        # transaction, one flush, each add applied in order with its own outcome.
        add = _Add(n, key, now_ms)
        if self._db.groups_commits:  # its group commit already runs a burst of adds under one flush
            self._db.transaction(lambda tx: self._apply_adds(tx, account, counter, [add]))
            if add.error is not None:
                raise add.error
            assert add.change is not None
            return add.change
        where = (account, counter)
        with self._adds_lock:
            self._adds.setdefault(where, []).append(add)
        with self._add_locks[hash(where) % len(self._add_locks)]:
            if not add.done:  # else the thread before us applied it with its group
                with self._adds_lock:
                    group = self._adds.pop(where, [])
                try:
                    self._db.transaction(lambda tx: self._apply_adds(tx, account, counter, group))
                except BaseException as exc:  # nothing of the group was committed
                    for each in group:
                        each.change, each.error = None, exc
                finally:
                    for each in group:
                        each.done = True
        if add.error is not None:
            raise add.error
        assert add.change is not None
        return add.change

    def _apply_adds(self, tx: Tx, account: str, counter: str, group: list[_Add]) -> None:
        names = {"account": account, "counter": counter}
        for add in group:
            add.change, add.error = None, None
            if add.key is not None and not self._run(tx, "take_counter_key", **names, key=add.key):
                add.change = CounterChange(self._counter(tx, account, counter, 0, add.now_ms), [])
                continue
            value = self._counter(tx, account, counter, add.n, add.now_ms)
            if abs(value) > MAX_COUNTER:
                self._counter(tx, account, counter, -add.n, add.now_ms)  # undone: nothing changed
                if add.key is not None:
                    self._send(tx, "forget_counter_key", **names, key=add.key)
                add.error = InvalidRequest(
                    f"counter {counter!r} would be {value}; a counter stays within ±2^53 (nothing was added)"
                )
                continue
            wakeups = self._send_notices(tx, account, counter, add.now_ms) if value == 0 else []
            add.change = CounterChange(value, wakeups)

    def _counter(self, tx: Tx, account: str, counter: str, n: int, now_ms: int) -> int:
        """Add ``n`` (the row locked, made at 0 if missing); the value after."""
        return int(self._rows(tx, "add_to_counter", account=account, counter=counter, n=n, now=now_ms)[0][0])

    def _send_notices(self, tx: Tx, account: str, counter: str, now_ms: int) -> list[Wakeup]:
        wakeups: list[Wakeup] = []
        payload = json.dumps({"counter": counter, "value": 0})
        for workflow, instance_id, event_type in self._rows(tx, "unsent_notices", account=account, counter=counter):
            self._send(
                tx,
                "mark_notice_sent",
                account=account,
                counter=counter,
                workflow=workflow,
                instance=instance_id,
                event_type=event_type,
                now=now_ms,
            )
            row = self._lock(tx, account, workflow, instance_id)
            if row is None or row.status in FINISHED:
                continue  # nobody to tell any more
            key = {"account": account, "workflow": workflow, "id": instance_id}
            self._send(tx, "insert_event", **key, type=event_type, payload=payload, now=now_ms)
            seq = self._rows(tx, "insert_wakeup", **key, now=now_ms)[0][0]
            wakeups.append(Wakeup(int(seq), account, workflow, instance_id))
        return wakeups

    def counter_value(self, account: str, counter: str) -> int:
        rows = self._read("counter_value", account=account, counter=counter)
        return int(rows[0][0]) if rows else 0

    def counter_notify(
        self, account: str, counter: str, workflow: str, instance_id: str, event_type: str, now_ms: int
    ) -> CounterChange:
        def notify(tx: Tx) -> CounterChange:
            # Adding 0 locks the counter's row, so an add that reaches zero sees this notice or
            # this sees the zero (the counter first, then the instance, as an add locks them).
            value = self._counter(tx, account, counter, 0, now_ms)
            if self._lock(tx, account, workflow, instance_id) is None:
                raise InstanceNotFound(f"workflow {workflow!r} has no instance {instance_id!r} to notify")
            self._send(
                tx,
                "insert_notice",
                account=account,
                counter=counter,
                workflow=workflow,
                instance=instance_id,
                event_type=event_type,
            )
            return CounterChange(value, self._send_notices(tx, account, counter, now_ms) if value == 0 else [])

        return self._db.transaction(notify)

    def counter_delete(self, account: str, counter: str) -> bool:
        def delete(tx: Tx) -> bool:
            names = {"account": account, "counter": counter}
            deleted = [self._run(tx, q, **names) for q in ("delete_counter", "delete_counter_keys", "delete_notices")]
            return any(deleted)

        return self._db.transaction(delete)

    def wakeups_sent(self, account: str, seqs: list[int]) -> None:
        def forget(tx: Tx) -> None:
            for seq in seqs:
                self._send(tx, "delete_wakeup", account=account, seq=seq)

        if seqs:
            self._db.transaction(forget)

    def owed_wakeups(self, before_ms: int, limit: int) -> list[Wakeup]:
        rows = self._read("owed_wakeups", before=before_ms, limit=limit)
        return [Wakeup(int(seq), account, workflow, instance) for seq, account, workflow, instance in rows]

    def schedules(self) -> list[ScheduleRow]:
        rows = self._read("list_schedules")
        return [
            ScheduleRow(account, workflow, WorkflowSettings.from_json(json.loads(settings)).schedules, last)
            for account, workflow, settings, last in rows
        ]

    def start_tick(
        self, account: str, workflow: str, tick_ms: int, instance: NewInstance, now_ms: int
    ) -> InstanceRow | None:
        def start(tx: Tx) -> InstanceRow | None:
            # The row lock (PostgreSQL) or the write lock (SQLite) makes the tick's claim and the
            # instance one step: a second coordinator finds the tick taken and changes nothing.
            if not self._run(tx, "claim_tick", account=account, workflow=workflow, tick=tick_ms):
                return None
            record = self._rows(tx, "get_workflow", account=account, name=workflow)
            if not record:
                return None
            row = self._insert(tx, account, workflow, _record(record[0]).version_id, instance, now_ms, tick_ms)
            return row if isinstance(row, InstanceRow) else None

        return self._db.transaction(start)

    def sync(self) -> None:
        self._db.sync()

    def close(self) -> None:
        self._db.close()
