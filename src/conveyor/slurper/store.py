"""``JobStore``: every state transition of a migration job and of its keys, each one transaction
of the tool's own tables (:mod:`conveyor.slurper.database`). The pipeline's consumers and the
client call only these methods; nothing else writes the tables.

>>> store = JobStore(open_job_database(cv.deployment))
>>> row = store.create_job("local", source, target, overwrite=True, now_ms=clock.now_ms())
>>> store.record_listing(row.id, 0, page, after="photos/0999.jpg", done=False, now_ms=...)
True
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Literal

import orjson

from conveyor.slurper.database import JobDatabase, Row, Transaction, open_job_database
from conveyor.slurper.errors import InvalidJobState, JobNotFound
from conveyor.slurper.model import Endpoint, JobLog, JobRow, Status, log_entry

if TYPE_CHECKING:
    from conveyor.client.sync import Conveyor

KeyOutcome = Literal["transferred", "skipped", "failed"]
# What a transfer finds when it tries to lock its key.
LockResult = Literal["locked", "finished", "held", "absent"]


@dataclasses.dataclass(frozen=True)
class Listed:
    """A key a listing found: its size (-1 when not known until it is read) and etag."""

    key: str
    size: int
    etag: str = ""
    storage_class: str = ""


@dataclasses.dataclass(frozen=True)
class LockedKey:
    """``again``: the message already held the lock (an earlier delivery of it died or failed, and
    may have copied the object before it could count it)."""

    result: LockResult
    size: int = -1
    etag: str = ""
    storage_class: str = ""
    again: bool = False


@dataclasses.dataclass(frozen=True)
class Finished:
    """A transfer's outcome, to count: its key, the message that holds the key's lock, the bytes
    transferred, and the log entry (type, message) that goes with it, if any."""

    key: str
    owner: str
    outcome: KeyOutcome
    size: int = 0
    log: tuple[str, str] | None = None


# pause/resume/abort: the status each may start from, the status it leaves, and its log type.
_TRANSITIONS: dict[str, tuple[tuple[Status, ...], Status, str]] = {
    "pause": (("running",), "paused", "migrationPause"),
    "resume": (("paused",), "running", "migrationResume"),
    "abort": (("running", "paused"), "aborted", "migrationAbort"),
}


def _job(row: Row) -> JobRow:
    return JobRow(
        id=row[0],
        account=row[1],
        created_ms=int(row[2]),
        finished_ms=None if row[3] is None else int(row[3]),
        status=row[4],
        overwrite=bool(row[5]),
        source=Endpoint.from_stored(orjson.loads(row[6])),
        target=Endpoint.from_stored(orjson.loads(row[7])),
        objects=int(row[8]),
        transferred=int(row[9]),
        skipped=int(row[10]),
        failed=int(row[11]),
        bytes_listed=int(row[12]),
        bytes_transferred=int(row[13]),
        next_listing=int(row[14]),
        listing_after=row[15],
        listing_done=bool(row[16]),
        lifecycle_tick=int(row[17]),
    )


def _log(tx: Transaction, job_id: str, now_ms: int, log_type: str, message: str, key: str | None = None) -> None:
    tx.run(
        "insert_log",
        {"job_id": job_id, "created_ms": now_ms, "log_type": log_type, "message": message, "object_key": key},
    )


class JobStore:
    def __init__(self, db: JobDatabase) -> None:
        self.db = db

    def close(self) -> None:
        self.db.close()

    # -- jobs ---------------------------------------------------------------------------------
    def create_job(self, account: str, source: Endpoint, target: Endpoint, *, overwrite: bool, now_ms: int) -> JobRow:
        """A new running job, with its ``migrationStart`` log entry."""
        job_id = str(uuid.uuid4())

        def create(tx: Transaction) -> JobRow:
            tx.run(
                "insert_job",
                {
                    "id": job_id,
                    "account": account,
                    "created_ms": now_ms,
                    "overwrite": int(overwrite),
                    "source": orjson.dumps(source.stored()).decode(),
                    "target": orjson.dumps(target.stored()).decode(),
                },
            )
            _log(tx, job_id, now_ms, "migrationStart", f"migration from {source.bucket} to {target.bucket} started")
            found = tx.one("job", {"id": job_id})
            assert found is not None
            return _job(found)

        return self.db.transaction(create, "creating a migration job")

    def find(self, job_id: str) -> JobRow | None:
        """The job ``job_id`` of any account (the pipeline's look-up), or None."""
        found = self.db.transaction(lambda tx: tx.one("job", {"id": job_id}), "reading a migration job")
        return None if found is None else _job(found)

    def job(self, account: str, job_id: str) -> JobRow:
        """The job ``job_id`` of ``account``; ``JobNotFound`` otherwise (another account's too)."""
        row = self.find(job_id) if isinstance(job_id, str) else None
        if row is None or row.account != account:
            raise JobNotFound(f"migration job {job_id!r} not found")
        return row

    def jobs(self, account: str, limit: int, offset: int) -> list[JobRow]:
        rows = self.db.transaction(
            lambda tx: tx.rows("jobs_of_account", {"account": account, "limit": limit, "offset": offset}),
            "listing migration jobs",
        )
        return [_job(r) for r in rows]

    def active_jobs(self, account: str) -> list[str]:
        rows = self.db.transaction(
            lambda tx: tx.rows("active_jobs_of_account", {"account": account}), "listing running migration jobs"
        )
        return [r[0] for r in rows]

    def change_status(self, account: str, job_id: str, action: str, now_ms: int) -> JobRow:
        """Pause, resume or abort ``job_id``; ``InvalidJobState`` if its status does not allow it.
        Pausing a paused job, or aborting an aborted one, changes nothing and is not an error."""
        starts, status, log_type = _TRANSITIONS[action]

        def change(tx: Transaction) -> JobRow:
            found = tx.one("job", {"id": job_id})
            if found is None or found[1] != account:
                raise JobNotFound(f"migration job {job_id!r} not found")
            row = _job(found)
            if row.status == status:
                return row
            if row.status not in starts:
                raise InvalidJobState(f"migration job {job_id} is {row.status}; it cannot {action}")
            finished = now_ms if status == "aborted" else None
            tx.run("set_status", {"id": job_id, "status": status, "finished_ms": finished, "expected": row.status})
            _log(tx, job_id, now_ms, log_type, f"migration {status}")
            return dataclasses.replace(row, status=status, finished_ms=finished)

        return self.db.transaction(change, f"{action} of a migration job")

    def try_complete(self, job_id: str, now_ms: int) -> bool:
        """Complete a running job whose listing is finished and every listed key accounted for."""

        def complete(tx: Transaction) -> bool:
            if tx.run("complete_job", {"id": job_id, "now": now_ms}) == 0:
                return False
            found = tx.one("job", {"id": job_id})
            assert found is not None
            row = _job(found)
            _log(
                tx,
                job_id,
                now_ms,
                "migrationComplete",
                f"migration complete: {row.objects} objects, {row.transferred} transferred, "
                f"{row.skipped} skipped, {row.failed} failed",
            )
            return True

        return self.db.transaction(complete, "completing a migration job")

    def advance_tick(self, job_id: str, tick: int) -> bool:
        """Take lifecycle tick ``tick`` (False: a duplicate or an old one)."""
        return self.db.transaction(
            lambda tx: tx.run("advance_tick", {"id": job_id, "tick": tick}) == 1, "a lifecycle tick"
        )

    def log(self, job_id: str, now_ms: int, log_type: str, message: str, key: str | None = None) -> None:
        self.db.transaction(lambda tx: _log(tx, job_id, now_ms, log_type, message, key), "logging")

    def logs(self, job_id: str, limit: int, offset: int, log_type: str | None = None) -> list[JobLog]:
        """The job's log entries, oldest first; only those of ``log_type`` when it is given."""
        params = {"job_id": job_id, "limit": limit, "offset": offset, "log_type": log_type}
        query = "logs_of_job" if log_type is None else "logs_of_job_by_type"
        rows = self.db.transaction(lambda tx: tx.rows(query, params), "reading a job's logs")
        return [log_entry(job_id, int(r[0]), r[1], r[2], r[3]) for r in rows]

    # -- listings -----------------------------------------------------------------------------
    def record_listing(self, job_id: str, seq: int, page: Sequence[Listed], *, after: str, done: bool) -> bool:
        """Record listing ``seq``'s page: its new keys (pending), the job's counts and where the
        next listing starts, in one transaction. False if ``seq`` is not the job's next listing (a
        duplicate or retried one), and nothing changes."""

        def record(tx: Transaction) -> bool:
            found = tx.one("job", {"id": job_id})
            if found is None or int(found[14]) != seq:
                return False
            added = size = 0
            for item in page:
                fresh = tx.run(
                    "insert_key",
                    {
                        "job_id": job_id,
                        "key": item.key,
                        "listing": seq,
                        "size": item.size,
                        "etag": item.etag,
                        "storage_class": item.storage_class,
                    },
                )
                added += fresh
                size += max(item.size, 0) * fresh
            tx.run(
                "record_listing",
                {"id": job_id, "seq": seq, "after": after, "done": int(done), "added": added, "bytes": size},
            )
            return True

        return self.db.transaction(record, "recording a listing")

    def pending_of_listing(self, job_id: str, seq: int) -> list[str]:
        rows = self.db.transaction(
            lambda tx: tx.rows("pending_keys_of_listing", {"job_id": job_id, "listing": seq}), "reading a listing"
        )
        return [r[0] for r in rows]

    def pending_keys(self, job_id: str, page: int = 1000) -> Iterator[list[str]]:
        """Every pending key of the job, ``page`` at a time (resume sends their transfers again)."""
        params: dict[str, object] = {"job_id": job_id, "after": "", "limit": page}
        while True:
            rows = self.db.transaction(lambda tx: tx.rows("pending_keys_after", params), "reading pending keys")
            if not rows:
                return
            yield [r[0] for r in rows]
            params["after"] = rows[-1][0]

    def key_states(self, job_id: str) -> dict[str, int]:
        rows = self.db.transaction(lambda tx: tx.rows("key_states", {"job_id": job_id}), "counting keys")
        return {r[0]: int(r[1]) for r in rows}

    # -- keys ---------------------------------------------------------------------------------
    def lock_keys(self, job_id: str, keys: Sequence[tuple[str, str]]) -> tuple[JobRow | None, list[LockedKey]]:
        """The job, and each ``(key, owner)`` locked for its transfer message ``owner`` (again, if
        it already holds it: its earlier delivery died or failed), all in one transaction.
        ``finished``: the key is transferred, skipped or failed; ``held``: another message holds
        it; ``absent``: no listing recorded it. A job that is not running locks nothing (no
        results): a paused job's keys held by these messages go back to pending (resume sends
        their transfers again)."""

        def lock(tx: Transaction) -> tuple[JobRow | None, list[LockedKey]]:
            found = tx.one("job", {"id": job_id})
            if found is None:
                return None, []
            row = _job(found)
            if row.status != "running":
                if row.status == "paused":
                    for key, owner in keys:
                        tx.run("release_key", {"job_id": job_id, "key": key, "owner": owner})
                return row, []
            return row, [_lock_key(tx, job_id, key, owner) for key, owner in keys]

        # Not flushed: a lock lost in a power cut only repeats the copy (the count's durable commit
        # after it flushes it too).
        return self.db.transaction(lock, "locking keys", durable=False)

    def finish_keys(self, job_id: str, outcomes: Sequence[Finished], *, now_ms: int) -> bool:
        """Unlock each key as its outcome and count it, with its log entry, all in one transaction
        (a key whose owner no longer holds it changes nothing). Whether, after it, the job's
        listing is finished and every listed key counted."""

        def finish(tx: Transaction) -> bool:
            for item in outcomes:
                params = {"job_id": job_id, "key": item.key, "owner": item.owner, "state": item.outcome}
                if tx.run("finish_key", params) == 0:
                    continue
                if item.outcome == "transferred":
                    tx.run("count_transferred", {"id": job_id, "bytes": item.size})
                else:
                    tx.run(f"count_{item.outcome}", {"id": job_id})
                if item.log is not None:
                    _log(tx, job_id, now_ms, item.log[0], item.log[1], item.key)
            return tx.one("job_done", {"id": job_id}) is not None

        return self.db.transaction(finish, "counting keys")


def _lock_key(tx: Transaction, job_id: str, key: str, owner: str) -> LockedKey:
    found = tx.one("key", {"job_id": job_id, "key": key})
    if found is None:
        return LockedKey("absent")
    state, holder, size, etag, storage_class = found
    if state in ("transferred", "skipped", "failed"):
        return LockedKey("finished")
    if state == "locked" and holder != owner:
        return LockedKey("held")
    tx.run("lock_key", {"job_id": job_id, "key": key, "owner": owner})
    return LockedKey("locked", int(size), etag, storage_class, again=state == "locked")


def job_store(cv: Conveyor) -> JobStore:
    """The job store of ``cv``'s deployment, opened once per client and closed with it."""
    return cv.component("slurper", lambda deployment, clock: JobStore(open_job_database(deployment)))
