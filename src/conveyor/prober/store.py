"""``ProbeStore``: every state transition of a fleet's targets and jobs, each one transaction of the
prober's own tables (``prober.db`` in a SQLite deployment, migration 0015 in a PostgreSQL one).
Nothing else writes them.

How a claim can never check a target twice, however many claimers race (on PostgreSQL they run at
once, at READ COMMITTED; on SQLite they take turns):

1. The rules are unique indexes: a target has at most one open (claimed or running) job, and so
   has a host. A job row that would break one is not inserted (``ON CONFLICT DO NOTHING``).
2. A job ends (finished) and moves its target's next due time in one transaction; the claimer
   then updates the target's row on the condition that it is still due. A claimer that read the
   target as due before that commit either waits for the row and finds it no longer due, or sees
   the new due time at once: the gap between "the job ended" and "the target is not due" that a
   read-then-write claim falls into does not exist.
3. A job's lease (claim, then start) runs out unless it finishes first: the sweeper marks it
   abandoned, which frees its target and host for the next round; a late finish of an abandoned
   job is refused (only the attempt that started a job may finish it, and only while it runs).

>>> store = ProbeStore(open_probe_tables(cv.deployment))
>>> claimed = store.claim("local", "mcp", "round-1", "now", mark_ms, Shape(19, 5, 3), 600_000, clock.now_ms)
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import orjson

from conveyor.deployment import Deployment
from conveyor.engine.sqlfile import load_queries, load_script
from conveyor.engine.tables import Row, SqliteFile, Tables, Transaction, open_tables
from conveyor.errors import InvalidRequest
from conveyor.prober.errors import TargetNotFound
from conveyor.prober.model import HTTP_CHECK, CheckOutcome, FleetRow, Job, NewTarget, RoundRow, Shape, Target

if TYPE_CHECKING:
    from conveyor.client.sync import Conveyor

QUERIES = load_queries("conveyor.prober", "queries.sql")
SQLITE_FILE = SqliteFile("prober.db", load_script("conveyor.prober", "sqlite_schema.sql"), version=1)


def open_probe_tables(deployment: Deployment, *, pool_size: int = 8) -> Tables:
    """The prober's tables of ``deployment``'s engine (a worker's and a claimer's: over ``http://``
    a client reaches a fleet through the server's routes, :mod:`conveyor.prober.remote`)."""
    tables = open_tables(deployment, SQLITE_FILE, QUERIES, pool_size=pool_size)
    if tables is None:
        raise InvalidRequest(
            "a prober's worker runs on the deployment itself: connect it to the deployment's SQLite or "
            "PostgreSQL URL (clients of a server reach fleets through its routes)"
        )
    return tables


@dataclasses.dataclass(frozen=True)
class ClaimedRound:
    """A round and its jobs' ids by message (``slots[i]``: the jobs message ``i`` carries)."""

    round: RoundRow
    slots: list[list[str]]

    @property
    def job_ids(self) -> list[str]:
        return [job for slot in self.slots for job in slot]


def _fleet(row: Row) -> FleetRow:
    shape = None if row[5] is None else Shape(int(row[5]), int(row[6]), int(row[7]))
    return FleetRow(
        account=row[0],
        fleet=row[1],
        created_ms=int(row[2]),
        registered_ms=None if row[3] is None else int(row[3]),
        checks=tuple(orjson.loads(row[4])),
        shape=shape,
        schedule=row[8],
        lease_ms=None if row[9] is None else int(row[9]),
    )


def _target(row: Row) -> Target:
    return Target(
        id=row[0],
        address=row[1],
        host=row[2],
        check=row[3],
        interval_ms=int(row[4]),
        added_ms=int(row[5]),
        due_ms=int(row[6]),
        last_state=row[7],
        last_ended_ms=None if row[8] is None else int(row[8]),
        last_ok=None if row[9] is None else bool(row[9]),
        last_latency_ms=None if row[10] is None else int(row[10]),
        last_error=row[11],
    )


def _optional(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def job_from_row(row: Row) -> Job:
    return Job(
        id=row[0],
        account=row[1],
        fleet=row[2],
        round_id=row[3],
        target_id=row[4],
        address=row[5],
        host=row[6],
        check=row[7],
        slot=int(row[8]),
        mark_ms=int(row[9]),
        state=row[10],
        claimed_ms=int(row[11]),
        lease_until_ms=int(row[12]),
        started_ms=_optional(row[13]),
        ended_ms=_optional(row[14]),
        runner=row[15],
        ok=None if row[16] is None else bool(row[16]),
        latency_ms=_optional(row[17]),
        error=row[18],
        detail=row[19],
    )


def _round(row: Row) -> RoundRow:
    return RoundRow(
        id=row[0],
        trigger=row[1],
        mark_ms=int(row[2]),
        claimed_ms=int(row[3]),
        shape=Shape(int(row[4]), int(row[5]), int(row[6])),
        jobs=int(row[7]),
    )


def _slots(rows: Sequence[Row], shape: Shape) -> list[list[str]]:
    slots: list[list[str]] = [[] for _ in range(max(shape.messages, 1))]
    for job_id, slot, _state in rows:
        slots[int(slot)].append(job_id)
    return [slot for slot in slots if slot]


class ProbeStore:
    def __init__(self, db: Tables) -> None:
        self.db = db

    def close(self) -> None:
        self.db.close()

    # -- fleets -------------------------------------------------------------------------------
    def fleet(self, account: str, fleet: str) -> FleetRow | None:
        found = self.db.read(lambda tx: tx.one("fleet", {"account": account, "fleet": fleet}), "reading a probe fleet")
        return None if found is None else _fleet(found)

    def fleets(self, account: str) -> list[FleetRow]:
        rows = self.db.read(lambda tx: tx.rows("fleets_of_account", {"account": account}), "listing probe fleets")
        return [_fleet(r) for r in rows]

    def register(
        self,
        account: str,
        fleet: str,
        checks: Sequence[str],
        shape: Shape,
        schedule: str | None,
        lease_ms: int,
        now_ms: int,
    ) -> None:
        """Record what the worker running ``fleet`` offers: its check names, shape and schedule."""
        names = orjson.dumps(sorted({HTTP_CHECK, *checks})).decode()

        def register(tx: Transaction) -> None:
            tx.run("insert_fleet", {"account": account, "fleet": fleet, "now": now_ms, "checks": names})
            tx.run(
                "register_fleet",
                {
                    "account": account,
                    "fleet": fleet,
                    "now": now_ms,
                    "checks": names,
                    "messages": shape.messages,
                    "per_message": shape.per_message,
                    "at_a_time": shape.at_a_time,
                    "schedule": schedule,
                    "lease_ms": lease_ms,
                },
            )

        self.db.transaction(register, "registering a probe fleet")

    # -- targets ------------------------------------------------------------------------------
    def add_targets(self, account: str, fleet: str, targets: Sequence[NewTarget], now_ms: int) -> tuple[int, int]:
        """Add ``targets`` (due at once) in one transaction, the fleet too if it is new; ``(added,
        already listed)``: a target of the same address and check is left as it is."""

        def add(tx: Transaction) -> tuple[int, int]:
            checks = orjson.dumps([HTTP_CHECK]).decode()
            tx.run("insert_fleet", {"account": account, "fleet": fleet, "now": now_ms, "checks": checks})
            added = 0
            for target in targets:
                added += tx.run(
                    "insert_target",
                    {
                        "id": uuid.uuid4().hex,
                        "account": account,
                        "fleet": fleet,
                        "address": target.address,
                        "host": target.host,
                        "check_name": target.check,
                        "interval_ms": target.interval_ms,
                        "now": now_ms,
                    },
                )
            return added, len(targets) - added

        return self.db.transaction(add, "adding probe targets")

    def targets(self, account: str, fleet: str) -> list[Target]:
        rows = self.db.read(
            lambda tx: tx.rows("targets", {"account": account, "fleet": fleet}), "listing probe targets"
        )
        return [_target(r) for r in rows]

    def remove_target(self, account: str, fleet: str, key: str, now_ms: int) -> list[str]:
        """Remove the target whose id is ``key``, or every target of address ``key``; their claimed
        jobs are cancelled (a running one finishes). The removed addresses; ``TargetNotFound`` if none."""

        def remove(tx: Transaction) -> list[str]:
            found = tx.rows("target_by_id", {"account": account, "fleet": fleet, "id": key})
            found = found or tx.rows("targets_by_address", {"account": account, "fleet": fleet, "address": key})
            if not found:
                raise TargetNotFound(f"fleet {fleet!r} has no target with id or address {key!r}")
            for target_id, _address, _check in found:
                tx.run("cancel_target_jobs", {"id": target_id, "now": now_ms})
                tx.run("delete_target", {"id": target_id})
            return [f"{address} ({check})" for _id, address, check in found]

        return self.db.transaction(remove, "removing a probe target")

    # -- rounds -------------------------------------------------------------------------------
    def claim(
        self,
        account: str,
        fleet: str,
        round_id: str,
        trigger: str,
        mark_ms: int,
        shape: Shape,
        lease_ms: int,
        clock: Callable[[], int],
    ) -> ClaimedRound:
        """Claim the round ``round_id``: abandon the fleet's jobs whose lease ran out, then claim up
        to ``shape.limit`` due targets, one per host whose host has no open job, spread over
        ``shape.messages`` slots in turn. A round claimed before (a retried tick) is returned as it
        was, its jobs unchanged. ``clock`` is read inside the transaction: a job's claim time is
        read once its rows are taken, so it is never earlier than the end of the job it follows."""
        key = {"account": account, "fleet": fleet}

        def claim(tx: Transaction) -> ClaimedRound:
            existing = tx.one("round", {**key, "id": round_id})
            if existing is not None:
                before = _round(existing)
                return ClaimedRound(before, _slots(tx.rows("round_jobs", {**key, "round_id": round_id}), before.shape))
            now = clock()
            tx.run("sweep_fleet", {**key, "now": now})
            round_row = {"id": round_id, "trigger": trigger, "mark_ms": mark_ms, "now": now}
            counts = {"messages": shape.messages, "per_message": shape.per_message, "at_a_time": shape.at_a_time}
            tx.run("insert_round", {**key, **counts, **round_row})
            candidates = tx.rows("claimable", {**key, "now": now, "limit": shape.limit})
            # In host order: claimers that race wait for each other's rows in one order, never in a
            # cycle. A target lost to another claimer stays due for the next round.
            claimed = 0
            for target_id, _host in sorted(candidates, key=lambda c: (c[1], c[0])):
                claimed += self._take(tx, round_id, target_id, claimed, shape, mark_ms, lease_ms, clock)
            tx.run("count_round_jobs", {**key, "id": round_id, "jobs": claimed})
            row = tx.one("round", {**key, "id": round_id})
            assert row is not None
            return ClaimedRound(_round(row), _slots(tx.rows("round_jobs", {**key, "round_id": round_id}), shape))

        return self.db.transaction(claim, "claiming a probe round")

    @staticmethod
    def _take(
        tx: Transaction,
        round_id: str,
        target_id: str,
        claimed: int,
        shape: Shape,
        mark_ms: int,
        lease_ms: int,
        clock: Callable[[], int],
    ) -> bool:
        """Claim one target for the round; False if another claimer holds it or its host, or it is
        no longer due (the claimer lost a race for it)."""
        job_id = uuid.uuid4().hex
        now = clock()
        job = {
            "id": job_id,
            "round_id": round_id,
            "target_id": target_id,
            "slot": claimed % shape.messages if shape.messages else 0,
            "mark_ms": mark_ms,
            "now": now,
            "lease_until": now + lease_ms,
        }
        if not tx.run("insert_job", job):
            return False
        if not tx.run("take_target", {"job": job_id, "target_id": target_id, "now": now}):
            tx.run("drop_job", {"id": job_id})
            return False
        stamped = clock()
        tx.run("stamp_job", {"id": job_id, "now": stamped, "lease_until": stamped + lease_ms})
        return True

    def round(self, account: str, fleet: str, round_id: str) -> tuple[RoundRow, list[Job]] | None:
        """The round ``round_id`` and its jobs; None if no such round was claimed. Two reads, the
        round first: its jobs were claimed in its transaction, so they are there when it is."""
        key = {"account": account, "fleet": fleet}
        row = self.db.read(lambda tx: tx.one("round", {**key, "id": round_id}), "reading a probe round")
        if row is None:
            return None
        jobs = self.db.read(
            lambda tx: tx.rows("jobs_of_round", {**key, "round_id": round_id}), "reading a round's jobs"
        )
        return _round(row), [job_from_row(j) for j in jobs]

    def cancel_round(self, account: str, fleet: str, round_id: str, now_ms: int) -> int:
        """Cancel the round's jobs not started yet (its messages could not be sent)."""
        return self.db.transaction(
            lambda tx: tx.run(
                "cancel_round", {"account": account, "fleet": fleet, "round_id": round_id, "now": now_ms}
            ),
            "cancelling a probe round",
        )

    # -- jobs ---------------------------------------------------------------------------------
    def start(self, job_id: str, runner: str, lease_ms: int, now_ms: int) -> Job | None:
        """Start ``job_id`` for the attempt ``runner`` (its lease renewed); None if it is not claimed
        any more (started by another delivery, ended, or its lease ran out)."""

        def start(tx: Transaction) -> Job | None:
            params = {"id": job_id, "runner": runner, "now": now_ms, "lease_until": now_ms + lease_ms}
            if not tx.run("start_job", params):
                return None
            found = tx.one("job", {"id": job_id})
            return None if found is None else job_from_row(found)

        return self.db.transaction(start, "starting a probe job")

    def renew(self, account: str, fleet: str, round_id: str, slot: int, lease_ms: int, now_ms: int) -> int:
        """Renew the lease of the jobs of one message (``slot``) not started yet: their invocation
        is alive. Called by that invocation's one thread, never while another of its jobs starts
        (two transactions each locking the other's sibling would deadlock on PostgreSQL)."""
        params = {"account": account, "fleet": fleet, "round_id": round_id, "slot": slot}
        return self.db.transaction(
            lambda tx: tx.run("renew_slot", {**params, "now": now_ms, "lease_until": now_ms + lease_ms}),
            "renewing probe jobs' lease",
        )

    def finish(self, job: Job, runner: str, outcome: CheckOutcome, now_ms: int) -> bool:
        """Record ``outcome`` and schedule the target's next check (its round's mark plus its
        interval), in one transaction; False if the job no longer runs under ``runner`` (the
        sweeper abandoned it), and nothing changes."""

        def finish(tx: Transaction) -> bool:
            changed = tx.run(
                "finish_job",
                {
                    "id": job.id,
                    "runner": runner,
                    "now": now_ms,
                    "ok": int(outcome.ok),
                    "latency_ms": outcome.latency_ms,
                    "error": outcome.error,
                    "detail": orjson.dumps(outcome.detail).decode() if outcome.detail else None,
                },
            )
            if changed:
                tx.run("schedule_target", {"target_id": job.target_id, "job": job.id, "mark_ms": job.mark_ms})
            return bool(changed)

        return self.db.transaction(finish, "finishing a probe job")

    def sweep_fleet(self, account: str, fleet: str, now_ms: int) -> int:
        """Abandon the fleet's open jobs whose lease ran out (the coordinator's sweeper)."""
        return self.db.transaction(
            lambda tx: tx.run("sweep_fleet", {"account": account, "fleet": fleet, "now": now_ms}),
            "sweeping probe jobs",
        )

    # -- history ------------------------------------------------------------------------------
    def history(self, account: str, fleet: str, since_ms: int) -> tuple[list[Job], list[RoundRow], list[Row]]:
        """The fleet's jobs and rounds claimed since ``since_ms``, and its listed targets (id, added):
        three reads, each its own snapshot (a report, not a transaction)."""
        key = {"account": account, "fleet": fleet}
        jobs = self.db.read(lambda tx: tx.rows("jobs_since", {**key, "since": since_ms}), "reading probe jobs")
        rounds = self.db.read(lambda tx: tx.rows("rounds_since", {**key, "since": since_ms}), "reading probe rounds")
        listed = self.db.read(lambda tx: tx.rows("listed_targets", key), "reading probe targets")
        return [job_from_row(r) for r in jobs], [_round(r) for r in rounds], listed


def probe_store(cv: Conveyor) -> ProbeStore:
    """The probe store of ``cv``'s deployment, opened once per client and closed with it."""
    return cv.component("prober", lambda deployment, clock: ProbeStore(open_probe_tables(deployment)))
