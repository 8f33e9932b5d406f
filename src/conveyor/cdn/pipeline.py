"""The CDN's workflows, registered on a worker's app by :func:`add_workflows`.

``cdn-package-updates`` (PackageUpdatesWorkflow) runs on the CDN's cron, or now with
``conveyor cdn update``: one step per package asks the registry for its versions, records the new
ones (cdnjs's rule, :func:`conveyor.cdn.registry.new_versions`) as queued and starts one
``cdn-download-package`` (DownloadPackageWorkflow) per queued version. The download's id is derived
from the account, package and version, so a step that runs again (after a crash) starts none twice.

``cdn-download-package`` stages the tarball in the staging bucket, verifies it against the
registry's hashes, extracts it, selects its files with the config's ``fileMap``, writes them to the
staging bucket (``files/{name}/{version}/{dest}``) and records them. A bad tarball is a
``NonRetryableError``: the version is recorded ``failed`` with the reason and the instance errors.
After its files are processed and fanned in, its last step starts the version's
``cdn-publish-version`` (PublishingWorkflow, :mod:`conveyor.cdn.publish`), with an id derived from
the account, package and version; a publish that fails records the version ``failed``.

``cdn-process-file`` (ProcessingWorkflow), one per selected file: a ``.png`` / ``.jpg`` optimised
losslessly in place first (:mod:`conveyor.cdn.images`, where the config allows it); the file's
SHA-512 and SRI; its minified twin when cdnjs's rules give it one (:mod:`conveyor.cdn.minify`,
planned by the download from the whole tarball); a compression job per output to
``cdn-compress`` and, per output, a wait for the staging bucket's notification that its ``.br``
and ``.gz`` exist (:mod:`conveyor.cdn.compression`); then both outputs recorded together, and the
count down.

>>> app = conveyor.App(cv); conveyor.cdn.add_workflows(app); app.run()
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

import conveyor
from conveyor import limits
from conveyor.cdn import git, tarball
from conveyor.cdn.compression import (
    COMPRESSION_QUEUE,
    add_notification_relay,
    compressed_event,
    compresses,
    ensure_compression,
)
from conveyor.cdn.config import CdnSettings
from conveyor.cdn.errors import IntegrityMismatch, InvalidTarball, PackageNotFound, UnknownPackage
from conveyor.cdn.images import OptimizeFailed, optimize, optimizes, tool_of
from conveyor.cdn.metadata import served
from conveyor.cdn.minify import MinifyFailed, minify, plan_minified
from conveyor.cdn.publish import COPY_BATCH, Publisher
from conveyor.cdn.registry import Dist, RegistryClient, new_versions
from conveyor.cdn.store import CdnStore, ProcessedFile
from conveyor.engine.accounts import LOCAL_ACCOUNT

UPDATES_WORKFLOW = "cdn-package-updates"
DOWNLOAD_WORKFLOW = "cdn-download-package"
PROCESSING_WORKFLOW = "cdn-process-file"
PUBLISH_WORKFLOW = "cdn-publish-version"
FILES_PROCESSED = "files-processed"  # the event the fan-in counter sends the download at zero
SRI_EXTENSIONS = (".js", ".css")  # cdnjs gives SRIs to these only (not .mjs)
BATCH = 100  # create_batch's limit
COMPRESSION_TIMEOUT = "1 hour"  # a compressor's wait: no compressor running for this long fails the file
log = logging.getLogger("conveyor.cdn")


def account_of(cv: conveyor.Conveyor) -> str:
    return cv.deployment.account or LOCAL_ACCOUNT


def download_id(account: str, name: str, version: str) -> str:
    """The DownloadPackageWorkflow instance of a version: the same id every time it is derived."""
    return "dl-" + hashlib.sha256(f"{account}/{name}@{version}".encode()).hexdigest()[:40]


def publish_id(account: str, name: str, version: str) -> str:
    """The PublishingWorkflow instance a version's download starts: the same id every time."""
    return "pub-" + hashlib.sha256(f"{account}/{name}@{version}".encode()).hexdigest()[:40]


def tarball_key(name: str, version: str) -> str:
    return f"tarballs/{name}/{version}.tgz"


def file_key(name: str, version: str, dest: str) -> str:
    return f"files/{name}/{version}/{dest}"


def _now_ms() -> int:
    return int(time.time() * 1000)


class _Pipeline:
    def __init__(self, cv: conveyor.Conveyor, store: CdnStore, settings: CdnSettings) -> None:
        self.cv = cv
        self.store = store
        self.settings = settings
        self.account = settings.account

    def check_package(self, name: str, registry: str) -> list[str]:
        """Queue the new versions of ``name`` and start a download for each version still queued."""
        config = self.store.package(self.account, name)
        try:
            if config.source == "git":
                dists = git.GitSource(config.target).versions()
            else:
                client = RegistryClient(registry)
                try:
                    dists = client.versions(config.target)
                finally:
                    client.close()
        except UnknownPackage as exc:  # asking again will not make it exist
            raise conveyor.NonRetryableError(str(exc)) from None
        chosen = new_versions(self.store.known_versions(self.account, name), dists, config.ignore_versions)
        now = _now_ms()
        for version in chosen:
            self.store.queue_version(self.account, name, version, dists[version], now_ms=now)
        queued = [row for row in self.store.versions(self.account, name) if row.state == "queued"]
        children = [
            {
                "id": download_id(self.account, name, row.version),
                "params": {"name": name, "version": row.version, "tarball": row.tarball, "integrity": row.integrity},
            }
            for row in queued
        ]
        workflow = self.cv.workflow(DOWNLOAD_WORKFLOW)
        for start in range(0, len(children), BATCH):
            workflow.create_batch(children[start : start + BATCH])  # ids taken by a rerun are refused
        return chosen

    def stage(self, params: dict[str, Any]) -> int:
        """The version's tarball into the staging bucket: the registry's, or (a git source) the
        tree of the commit its tag named when the version was found, packed by git."""
        if git.is_git(params["tarball"]):
            try:
                data = git.archive(params["tarball"], params.get("integrity"))
            except IntegrityMismatch as exc:  # the tag moved: fetching again will not move it back
                raise conveyor.NonRetryableError(f"{params['name']}@{params['version']}: {exc}") from None
        else:
            client = RegistryClient(self.settings.registry)
            try:
                data = client.fetch(params["tarball"])
            finally:
                client.close()
        self.cv.bucket(self.settings.staging_bucket).put(tarball_key(params["name"], params["version"]), data)
        return len(data)

    def select(self, params: dict[str, Any]) -> dict[str, Any]:
        name, version = params["name"], params["version"]
        staging = self.cv.bucket(self.settings.staging_bucket)
        data = staging.get(tarball_key(name, version)).bytes()
        integrity: str | None = params.get("integrity")
        sha1 = integrity[5:] if integrity and integrity.startswith("sha1:") else None
        dist = Dist(params["tarball"], None if sha1 else integrity, sha1)
        try:
            if not git.is_git(params["tarball"]):  # a git version's commit was checked as it was staged
                tarball.verify(data, dist)
            files, skipped = tarball.extract(data)
            config = self.store.package(self.account, name)
        except (InvalidTarball, IntegrityMismatch, PackageNotFound) as exc:
            raise conveyor.NonRetryableError(f"{name}@{version}: {exc}") from None
        for reason in skipped:
            log.info("cdn %s@%s: skipped %s", name, version, reason)
        selected = {}
        for path, dest in config.file_map.select(files).items():
            if served(dest):
                selected[path] = dest
            else:  # never served (403), and a `.gz`/`.br` would take a compressed copy's key
                skipped.append(f"{path}: not a file type the CDN serves")
                log.info("cdn %s@%s: skipped %s: not a file type the CDN serves", name, version, path)
        if not selected:
            raise conveyor.NonRetryableError(f"{name}@{version}: autoupdate.fileMap selects no file of the tarball")
        minified = plan_minified(selected, files, config.optimization)
        records = []
        optimized: dict[str, str] = {}  # the images to optimise in place, with their originals' SRIs
        for path, dest in sorted(selected.items(), key=lambda item: item[1]):
            staging.put(file_key(name, version, dest), files[path])
            file_sri = tarball.sri(files[path])
            records.append({"path": path, "dest": dest, "size": len(files[path]), "sha512": file_sri})
            if optimizes(dest, config.optimization):
                optimized[dest] = file_sri
        self.store.record_files(self.account, name, version, records, skipped, now_ms=_now_ms())
        return {
            "files": [r["dest"] for r in records],
            "minify": minified,
            "optimize": optimized,
            "skipped": len(skipped),
        }

    def fan_out(
        self,
        instance_id: str,
        name: str,
        version: str,
        files: list[str],
        minified: dict[str, str],
        optimized: dict[str, str],
    ) -> int:
        """Count the version's files up, register the fan-in notice, start one ProcessingWorkflow
        per file (ids derived from the download's, so a rerun starts none twice)."""
        counter = self.cv.counter(f"cdn-files:{instance_id}")
        counter.add(len(files), key="fan-out")
        counter.notify_at_zero(DOWNLOAD_WORKFLOW, instance_id, FILES_PROCESSED)
        children = [
            {
                "id": f"{instance_id}-{i}",
                "params": {
                    "counter": counter.name,
                    "name": name,
                    "version": version,
                    "dest": dest,
                    "minify": minified.get(dest),
                    "optimize": optimized.get(dest),
                },
            }
            for i, dest in enumerate(files)
        ]
        workflow = self.cv.workflow(PROCESSING_WORKFLOW)
        for start in range(0, len(children), BATCH):
            workflow.create_batch(children[start : start + BATCH])
        return len(children)

    def process(self, params: dict[str, Any]) -> dict[str, Any]:
        """One selected file as it is in staging: its size, SHA-512 and (``.js``, ``.css``) SRI."""
        data = self.cv.bucket(self.settings.staging_bucket).get(
            file_key(params["name"], params["version"], params["dest"])
        )
        return _output(params["dest"], data.bytes())

    def optimize(self, params: dict[str, Any]) -> dict[str, str] | None:
        """The image optimised in place in staging, when that makes it smaller: the ``tool`` and
        ``tool_version`` to record with it; None (logged) if the optimiser refuses it or gains
        nothing: the original is published as it is, as cdnjs does."""
        name, version, dest = params["name"], params["version"], params["dest"]
        staging = self.cv.bucket(self.settings.staging_bucket)
        key = file_key(name, version, dest)
        data = staging.get(key).bytes()
        try:
            if tarball.sri(data) != params["optimize"]:
                # Not the tarball's bytes: a run of this step that crashed before its result was
                # kept replaced them already, with the same optimiser (its output is deterministic).
                tool, tool_version = tool_of(dest)
                return {"tool": tool, "tool_version": tool_version}
            made = optimize(dest, data)
        except OptimizeFailed as exc:
            log.warning("cdn %s@%s: not optimised: %s", name, version, exc)
            return None
        if made is None:
            log.info("cdn %s@%s: %s kept as it is: optimising it made it no smaller", name, version, dest)
            return None
        staging.put(key, made.data)
        return {"tool": made.tool, "tool_version": made.tool_version}

    def minify(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """The file's minified twin, written to staging at ``params["minify"]``; None (logged) if
        the minifier refuses it: the original is published all the same, as cdnjs does."""
        name, version, dest, twin = params["name"], params["version"], params["dest"], params["minify"]
        staging = self.cv.bucket(self.settings.staging_bucket)
        try:
            made = minify(dest, staging.get(file_key(name, version, dest)).bytes())
        except MinifyFailed as exc:
            log.warning("cdn %s@%s: not minified: %s", name, version, exc)
            return None
        staging.put(file_key(name, version, twin), made.data)
        return _output(twin, made.data, source=dest, tool=made.tool, tool_version=made.tool_version)

    def send_compression(self, keys: list[str], instance_id: str) -> int:
        jobs = [{"body": {"key": key, "instance": instance_id}} for key in keys]
        self.cv.queue(COMPRESSION_QUEUE).send_batch(jobs)
        return len(jobs)

    def record(self, params: dict[str, Any], outputs: list[dict[str, Any]]) -> None:
        files = [ProcessedFile(**output) for output in outputs]
        self.store.record_outputs(self.account, params["name"], params["version"], files, now_ms=_now_ms())

    def fan_in(self, instance_id: str, name: str, version: str, expected: int) -> int:
        """After the children: the version is ``processed`` when every file was; the counter goes."""
        processed = sum(1 for f in self.store.files(self.account, name, version) if f.source is None)
        self.cv.counter(f"cdn-files:{instance_id}").delete()
        if processed != expected:
            raise conveyor.NonRetryableError(f"{name}@{version}: {expected - processed} of {expected} files failed")
        self.store.mark_processed(self.account, name, version, now_ms=_now_ms())
        return processed

    def start_publishing(self, name: str, version: str) -> str:
        """Start the version's PublishingWorkflow (its id derived: a rerun starts none twice)."""
        instance_id = publish_id(self.account, name, version)
        self.cv.workflow(PUBLISH_WORKFLOW).create_batch(
            [{"id": instance_id, "params": {"name": name, "version": version}}]
        )
        return instance_id


def _output(dest: str, data: bytes, **made: str) -> dict[str, Any]:
    """A :class:`ProcessedFile`'s fields (a step's result is JSON)."""
    integrity = tarball.sri(data) if dest.endswith(SRI_EXTENSIONS) else None
    return {"dest": dest, "size": len(data), "sha512": hashlib.sha512(data).hexdigest(), "sri": integrity, **made}


def add_workflows(app: conveyor.App, *, visibility_timeout_ms: int = limits.DEFAULT_VISIBILITY_TIMEOUT_MS) -> None:
    """Register the CDN's workflows on ``app`` (the account's CDN must exist: ``conveyor cdn
    init``), with the relay of the staging bucket's notifications to them; PackageUpdatesWorkflow
    runs on its cron. Files wait for a compressor (:func:`conveyor.cdn.add_compressor`, in this
    app or in ``conveyor cdn compressor`` processes). ``visibility_timeout_ms``: how long a run of
    a worker that died holds its instance before another worker goes on with it."""
    cv = app.conveyor
    store = CdnStore.open(cv.deployment)
    pipeline = _Pipeline(cv, store, store.settings(account_of(cv)))
    ensure_compression(cv, pipeline.settings.staging_bucket)
    add_notification_relay(app, pipeline.settings.staging_bucket, PROCESSING_WORKFLOW)
    publisher = Publisher(cv, store, pipeline.settings)

    def record_failure(step: conveyor.WorkflowStep, name: str, version: str, message: str) -> None:
        step.do(
            "record failure",
            lambda: store.record_failure(pipeline.account, name, version, message, now_ms=_now_ms()),
        )

    @app.workflow(UPDATES_WORKFLOW, schedules=[pipeline.settings.cron], visibility_timeout_ms=visibility_timeout_ms)
    def package_updates(event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> dict[str, Any]:
        params = event.payload if isinstance(event.payload, dict) else {}
        registry = params.get("registry") or pipeline.settings.registry
        names: list[str] = (
            [params["package"]]
            if params.get("package")
            else step.do("list packages", lambda: [c.name for c in store.packages(pipeline.account)])
        )
        started: dict[str, list[str]] = {}
        failed: dict[str, str] = {}
        for name in names:
            try:
                started[name] = step.do(
                    f"check {name}",
                    lambda name=name: pipeline.check_package(name, registry),  # type: ignore[misc]
                    retries=conveyor.Retries(limit=2, delay=2.0),
                )
            except conveyor.WorkflowStepError as exc:  # one package's failure does not stop the others
                failed[name] = exc.message
        return {"started": started, "failed": failed}

    @app.workflow(DOWNLOAD_WORKFLOW, visibility_timeout_ms=visibility_timeout_ms)
    def download_package(event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> dict[str, Any]:
        params: dict[str, Any] = event.payload
        name, version, me = params["name"], params["version"], event.instance_id
        try:
            step.do("stage tarball", lambda: pipeline.stage(params), retries=conveyor.Retries(limit=3, delay=2.0))
            selected: dict[str, Any] = step.do("verify, extract and select", lambda: pipeline.select(params))
            files: list[str] = selected["files"]
            minified: dict[str, str] = selected.get("minify", {})
            optimized: dict[str, str] = selected.get("optimize", {})
            step.do("fan out", lambda: pipeline.fan_out(me, name, version, files, minified, optimized))
            step.wait_for_event("files processed", type=FILES_PROCESSED, timeout="1 hour")
            processed = step.do("fan in", lambda: pipeline.fan_in(me, name, version, len(files)))
            publishing = step.do("start publishing", lambda: pipeline.start_publishing(name, version))
            return {"files": processed, "skipped": selected["skipped"], "publishing": publishing}
        except conveyor.WorkflowStepError as exc:
            record_failure(step, name, version, exc.message)
            raise

    @app.workflow(PUBLISH_WORKFLOW, visibility_timeout_ms=visibility_timeout_ms)
    def publish_version(event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> dict[str, Any]:
        params: dict[str, Any] = event.payload
        name, version = params["name"], params["version"]
        retries = conveyor.Retries(limit=5, delay=2.0)
        try:
            count: int = step.do("plan", lambda: publisher.plan(name, version), retries=retries)
            hashes: dict[str, list[Any]] = {}
            for start in range(0, count, COPY_BATCH):
                hashes.update(
                    step.do(
                        f"copy files {start}",
                        lambda start=start: publisher.copy(name, version, start, COPY_BATCH),  # type: ignore[misc]
                        retries=retries,
                    )
                )
            step.do("write metadata", lambda: publisher.write_metadata(name, version, hashes), retries=retries)
            published_ms = step.do("make visible", lambda: publisher.make_visible(name, version), retries=retries)
            latest = step.do(
                "write package",
                lambda: publisher.write_package(name, store.package(pipeline.account, name).raw),
                retries=retries,
            )
            return {"files": count, "objects": len(hashes), "published_ms": published_ms, "latest": latest}
        except conveyor.WorkflowStepError as exc:
            record_failure(step, name, version, exc.message)
            raise

    @app.workflow(PROCESSING_WORKFLOW, visibility_timeout_ms=visibility_timeout_ms)
    def process_file(event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> dict[str, Any]:
        params: dict[str, Any] = event.payload
        me, retries = event.instance_id, conveyor.Retries(limit=3, delay=1.0)
        outputs: list[dict[str, Any]] = []
        failure: str | None = None
        try:
            made: dict[str, str] | None = None
            if params.get("optimize"):  # an image, optimised in place first (its tool recorded with it)
                made = step.do("optimize", lambda: pipeline.optimize(params), retries=retries)
            outputs.append({**step.do("process", lambda: pipeline.process(params), retries=retries), **(made or {})})
            if params.get("minify"):
                twin = step.do("minify", lambda: pipeline.minify(params), retries=retries)
                if twin is not None:
                    outputs.append(twin)
            keys = [file_key(params["name"], params["version"], o["dest"]) for o in outputs if compresses(o["dest"])]
            if keys:
                step.do("send compression jobs", lambda: pipeline.send_compression(keys, me), retries=retries)
                for i, key in enumerate(keys):  # each output's .gz notification, in any order
                    step.wait_for_event(f"compressed {i}", type=compressed_event(key), timeout=COMPRESSION_TIMEOUT)
            step.do("record", lambda: pipeline.record(params, outputs), retries=retries)
        except conveyor.WorkflowStepError as exc:  # a failed child still counts down, or its parent waits
            failure = exc.message
        step.do("count down", lambda: cv.counter(params["counter"]).add(-1, key=me))
        return {
            "dest": params["dest"],
            "sri": outputs[0]["sri"] if outputs else None,
            "minified": outputs[1]["dest"] if len(outputs) > 1 else None,
            "error": failure,
        }
