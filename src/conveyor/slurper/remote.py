"""Migration jobs behind ``conveyor serve``: ``connect("http://...").slurper`` speaks the server's
Super Slurper routes (:mod:`conveyor.server.slurper_routes`, Cloudflare's shapes), so a client of a
server has the same ``create_job``, ``job``, ``list_jobs``, ``abort_all`` and :class:`RemoteJob`
methods as an embedded one. A dry run (``plan``) needs the deployment's own URL.

>>> cv = conveyor.connect("http://127.0.0.1:8787", token="...", account_id="acc1")
>>> cv.slurper.create_job(source={...}, target={"vendor": "r2", "bucket": "photos"}).progress()
"""

from __future__ import annotations

import builtins
import datetime
from collections.abc import Mapping
from typing import Any, TypeVar
from urllib.parse import quote

from conveyor import errors
from conveyor.client.http import RouteClient
from conveyor.deployment import Deployment
from conveyor.errors import ConveyorError, InvalidRequest
from conveyor.slurper import errors as slurper_errors
from conveyor.slurper.model import JobInfo, JobLog, JobProgress, Status
from conveyor.storage import errors as storage_errors
from conveyor.wire import slurper as shapes

T = TypeVar("T")
_BY_STATUS: dict[int, type[ConveyorError]] = {
    401: errors.Unauthorized,
    403: errors.Forbidden,
    404: slurper_errors.JobNotFound,
    409: slurper_errors.InvalidJobState,
}


def _time(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _info(job: shapes.SlurperJob) -> JobInfo:
    finished = _time(job.finished_at) if job.finished_at else None
    return JobInfo(job.id, _time(job.created_at), finished, job.overwrite, job.status, job.source, job.target)


class RemoteSlurper:
    """``cv.slurper`` of a client of ``conveyor serve`` (see :class:`conveyor.slurper.Slurper`)."""

    def __init__(self, deployment: Deployment, timeout: float = 120.0) -> None:
        self._routes = RouteClient(
            deployment, "/slurper", slurper_errors, storage_errors, by_status=_BY_STATUS, timeout=timeout
        )

    def close(self) -> None:
        self._routes.close()

    def call(
        self, kind: type[T], method: str, path: str, body: Any = None, params: Mapping[str, int | str] | None = None
    ) -> T:
        """The ``result`` of one route's answer, or the error the server refused with."""
        result: T = self._routes.call(kind, method, path, body, params)
        return result

    def create_job(self, source: Mapping[str, Any], target: Mapping[str, Any], overwrite: bool = True) -> RemoteJob:
        """Create a job on the server (its egress policy checks the endpoints); see
        :meth:`conveyor.slurper.Slurper.create_job`."""
        body = {"source": _camel(source), "target": _camel(target), "overwrite": overwrite}
        return RemoteJob(self, self.call(shapes.SlurperJobCreated, "POST", "/jobs", body).id)

    def job(self, job_id: str) -> RemoteJob:
        job = RemoteJob(self, job_id)
        job.info()
        return job

    def list_jobs(self, limit: int = 100, offset: int = 0) -> builtins.list[JobInfo]:
        found = self.call(list[shapes.SlurperJob], "GET", "/jobs", params={"limit": limit, "offset": offset})
        return [_info(j) for j in found]

    def abort_all(self) -> int:
        answer = self.call(str, "PUT", "/jobs/abortAll")
        return int(answer.split()[0])

    def plan(self, *args: Any, **kwargs: Any) -> Any:
        raise InvalidRequest("a dry run reads the source and target from this process: connect to the deployment's URL")


_CAMEL = {"path_prefix": "pathPrefix", "access_key_id": "accessKeyId", "secret_access_key": "secretAccessKey"}


def _camel(value: Mapping[str, Any]) -> dict[str, Any]:
    return {_CAMEL.get(k, k): _camel(v) if isinstance(v, Mapping) else v for k, v in value.items()}


class RemoteJob:
    """A job of the server's account (see :class:`conveyor.slurper.Job`)."""

    def __init__(self, slurper: RemoteSlurper, job_id: str) -> None:
        self._slurper = slurper
        self.id = job_id

    def __repr__(self) -> str:
        return f"RemoteJob({self.id!r})"

    def _path(self, rest: str = "") -> str:
        return f"/jobs/{quote(self.id, safe='')}{rest}"

    def info(self) -> JobInfo:
        return _info(self._slurper.call(shapes.SlurperJob, "GET", self._path()))

    def progress(self) -> JobProgress:
        p = self._slurper.call(shapes.SlurperProgress, "GET", self._path("/progress"))
        status: Status = p.status
        return JobProgress(
            p.id,
            _time(p.created_at),
            status,
            p.objects,
            p.transferred_objects,
            p.skipped_objects,
            p.failed_objects,
            p.listed_bytes,
            p.transferred_bytes,
            p.listing_finished,
        )

    def logs(self, limit: int = 100, offset: int = 0, *, log_type: str | None = None) -> list[JobLog]:
        params: dict[str, int | str] = {"limit": limit, "offset": offset}
        if log_type is not None:
            params["logType"] = log_type
        found = self._slurper.call(list[shapes.SlurperLog], "GET", self._path("/logs"), params=params)
        return [JobLog(_time(e.created_at), e.job, e.log_type, e.message, e.object_key) for e in found]

    def _change(self, action: str) -> JobInfo:
        self._slurper.call(str, "PUT", self._path("/" + action))
        return self.info()

    def pause(self) -> JobInfo:
        return self._change("pause")

    def resume(self) -> JobInfo:
        return self._change("resume")

    def abort(self) -> JobInfo:
        return self._change("abort")
