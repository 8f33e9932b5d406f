"""``cv.slurper``: migration jobs of the client's account, and the :class:`Job` handle. The REST
routes and the CLI call these same methods.

>>> job = cv.slurper.create_job(source={...}, target={"vendor": "r2", "bucket": "photos"})
>>> job.progress().transferred_objects
>>> cv.slurper.list_jobs(limit=10); cv.slurper.job(job.id).pause(); cv.slurper.abort_all()
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from conveyor.egress import EgressPolicy
from conveyor.errors import InvalidRequest
from conveyor.slurper.endpoints import (
    Source,
    Target,
    check_egress,
    open_source,
    open_target,
    precheck_both,
    precheck_source,
    precheck_target,
)
from conveyor.slurper.errors import TooManyJobs
from conveyor.slurper.model import (
    LOG_TYPES,
    JobInfo,
    JobLog,
    JobProgress,
    parse_overwrite,
    parse_source,
    parse_target,
)
from conveyor.slurper.rules import MAX_OBJECT_BYTES, changed, skip_reason
from conveyor.slurper.store import job_store

if TYPE_CHECKING:
    from conveyor.client.sync import Conveyor

MAX_PAGE = 1000
PAGE_SIZE = 1000


def _page(limit: object, offset: object) -> tuple[int, int]:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidRequest(f"limit is {limit!r}; it must be a whole number from 1 to {MAX_PAGE}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidRequest(f"offset is {offset!r}; it must be a whole number, 0 or more")
    return limit, offset


@dataclasses.dataclass(frozen=True)
class PlannedObject:
    """What a job would do with one object: ``action`` ``copy`` or ``skip``, and ``reason`` (``new``,
    ``changed``, ``overwrite``; ``exists``, or a log type such as ``importSkippedOversized``)."""

    key: str
    size: int
    action: str
    reason: str


def _planned(source: Source, target: Target, overwrite: bool, max_bytes: int) -> Iterator[PlannedObject]:
    after = ""
    try:
        while True:
            page, done = source.list_page(after, PAGE_SIZE)
            for item in page:
                skip = skip_reason(item.key, item.size, item.storage_class, max_bytes)
                if skip is not None:
                    yield PlannedObject(item.key, item.size, "skip", skip[0])
                    continue
                existing = target.existing(item.key)
                if existing is None:
                    yield PlannedObject(item.key, item.size, "copy", "new")
                elif overwrite:
                    yield PlannedObject(item.key, item.size, "copy", "overwrite")
                elif changed(existing, item.size, item.etag):
                    yield PlannedObject(item.key, item.size, "copy", "changed")
                else:
                    yield PlannedObject(item.key, item.size, "skip", "exists")
            if done or not page:
                return
            after = page[-1].key
    finally:
        source.close()
        target.close()


class Job:
    """One migration job of the account.

    >>> job = cv.slurper.job("0b5c...")
    >>> job.info().status, job.progress().objects
    ('running', 1200)
    """

    def __init__(self, cv: Conveyor, job_id: str) -> None:
        self._cv = cv
        self.id = job_id

    def __repr__(self) -> str:
        return f"Job({self.id!r})"

    def _row(self) -> Any:
        return job_store(self._cv).job(self._cv.deployment.account, self.id)

    def info(self) -> JobInfo:
        """The job as the API shows it (no secrets)."""
        info: JobInfo = self._row().info()
        return info

    def progress(self) -> JobProgress:
        """Objects listed so far, and how many are transferred, skipped and failed."""
        progress: JobProgress = self._row().progress()
        return progress

    def logs(self, limit: int = 100, offset: int = 0, *, log_type: str | None = None) -> list[JobLog]:
        """The job's log entries, oldest first; only those of ``log_type`` (``migrationStart``,
        ``importErrorRetryExhaustion`` ...) when it is given.

        >>> job.logs(limit=50, log_type="importErrorRetryExhaustion")
        """
        limit, offset = _page(limit, offset)
        if log_type is not None and log_type not in LOG_TYPES:
            raise InvalidRequest(f"log_type is {log_type!r}; it must be one of {', '.join(LOG_TYPES)}")
        self._row()
        return job_store(self._cv).logs(self.id, limit, offset, log_type)

    def _change(self, action: str) -> JobInfo:
        row = job_store(self._cv).change_status(
            self._cv.deployment.account, self.id, action, self._cv.engine.clock.now_ms()
        )
        return row.info()

    def pause(self) -> JobInfo:
        """Stop starting transfers (those under way finish); ``InvalidJobState`` unless running."""
        return self._change("pause")

    def resume(self) -> JobInfo:
        """Go on with a paused job: its listing, and a transfer for every key not yet copied."""
        from conveyor.slurper.pipeline import start_messages

        info = self._change("resume")
        start_messages(self._cv, self._row())
        return info

    def abort(self) -> JobInfo:
        """End the job for good (what is copied stays); aborting an aborted job changes nothing."""
        return self._change("abort")


class Slurper:
    """The migration jobs of ``cv``'s account (``cv.slurper``). ``max_jobs``: how many may be
    running or paused at once (None: no limit; Cloudflare's is 3)."""

    def __init__(self, cv: Conveyor, *, max_jobs: int | None = None) -> None:
        self._cv = cv
        self.max_jobs = max_jobs

    def create_job(
        self,
        source: Mapping[str, Any],
        target: Mapping[str, Any],
        overwrite: bool = True,
        *,
        egress: EgressPolicy | None = None,
    ) -> Job:
        """Check ``source`` and ``target`` (their fields as the wire's, camelCase or snake_case),
        reach both (a wrong key, a missing bucket or an unreachable endpoint is refused here, by
        name), then store the job and send its first messages. ``overwrite=False``: keys the target
        already holds are skipped. ``egress``: the server's policy for a tenant's endpoints."""
        from conveyor.slurper.pipeline import ensure_queues, start_messages

        source_spec, target_spec = parse_source(source), parse_target(target)
        flag = parse_overwrite(overwrite)
        check_egress(source_spec, egress)
        check_egress(target_spec, egress)
        store = job_store(self._cv)
        account = self._cv.deployment.account
        if self.max_jobs is not None and len(store.active_jobs(account)) >= self.max_jobs:
            raise TooManyJobs(f"the account runs {self.max_jobs} migration jobs already; the limit is {self.max_jobs}")
        precheck_both(self._cv, source_spec, target_spec)
        ensure_queues(self._cv)
        row = store.create_job(account, source_spec, target_spec, overwrite=flag, now_ms=self._cv.engine.clock.now_ms())
        start_messages(self._cv, row)
        return Job(self._cv, row.id)

    def plan(
        self,
        source: Mapping[str, Any],
        target: Mapping[str, Any],
        overwrite: bool = True,
        *,
        egress: EgressPolicy | None = None,
        max_object_bytes: int = MAX_OBJECT_BYTES,
    ) -> Iterator[PlannedObject]:
        """A dry run: what a job of these arguments would do with each object of the source, in key
        order, as it is listed (one listing request per page and a look at the target per key);
        nothing is created or copied.

        >>> [p.key for p in cv.slurper.plan(source, target, overwrite=False) if p.action == "copy"]
        """
        source_spec, target_spec = parse_source(source), parse_target(target)
        flag = parse_overwrite(overwrite)
        check_egress(source_spec, egress)
        check_egress(target_spec, egress)
        precheck_both(self._cv, source_spec, target_spec)
        return _planned(open_source(self._cv, source_spec), open_target(self._cv, target_spec), flag, max_object_bytes)

    def precheck_source(self, source: Mapping[str, Any], *, egress: EgressPolicy | None = None) -> None:
        """Reach ``source`` as a job would; raises what is wrong (``BucketUnauthorized`` ...)."""
        spec = parse_source(source)
        check_egress(spec, egress)
        precheck_source(self._cv, spec)

    def precheck_target(self, target: Mapping[str, Any], *, egress: EgressPolicy | None = None) -> None:
        """Reach ``target`` as a job would; raises what is wrong."""
        spec = parse_target(target)
        check_egress(spec, egress)
        precheck_target(self._cv, spec)

    def job(self, job_id: str) -> Job:
        """The job ``job_id`` of this account; ``JobNotFound`` otherwise."""
        job_store(self._cv).job(self._cv.deployment.account, job_id)
        return Job(self._cv, job_id)

    def list_jobs(self, limit: int = 100, offset: int = 0) -> builtins.list[JobInfo]:
        """The account's jobs, newest first."""
        limit, offset = _page(limit, offset)
        return [r.info() for r in job_store(self._cv).jobs(self._cv.deployment.account, limit, offset)]

    def abort_all(self) -> int:
        """Abort every running or paused job of the account; how many were aborted."""
        store = job_store(self._cv)
        account = self._cv.deployment.account
        ids = store.active_jobs(account)
        for job_id in ids:
            store.change_status(account, job_id, "abort", self._cv.engine.clock.now_ms())
        return len(ids)
