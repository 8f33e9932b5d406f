"""What ``conveyor cdn`` calls: make the account's CDN, show it, add package configs, start an update.

>>> init(cv)                                       # buckets "cdn" and "cdn-staging", npm, every 10 minutes
>>> add(cv, "packages/")                           # every packages/<letter>/<name>.json, all or nothing
['jquery', 'lodash']
>>> update(cv, package="jquery")                   # the PackageUpdatesWorkflow instance it started
'update-...'
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

import conveyor
from conveyor.cdn.compression import add_compressor, ensure_compression
from conveyor.cdn.config import DEFAULT_CRON, DEFAULT_REGISTRY, CdnSettings, PackageConfig
from conveyor.cdn.errors import InvalidPackageConfig
from conveyor.cdn.git import check_repository
from conveyor.cdn.pipeline import UPDATES_WORKFLOW, account_of
from conveyor.cdn.store import CdnStore
from conveyor.egress import EgressPolicy, check_url
from conveyor.workflows.schedules import check_cron

DAY_SECONDS = 86_400


def _bucket(cv: conveyor.Conveyor, name: str, url: str | None) -> conveyor.Bucket:
    try:
        return cv.bucket(name)
    except conveyor.BucketNotFound:
        return cv.create_bucket(name, url=url)


def init(
    cv: conveyor.Conveyor,
    *,
    primary: str = "cdn",
    primary_url: str | None = None,
    staging: str = "cdn-staging",
    staging_url: str | None = None,
    staging_days: int = 7,
    mirror: str | None = None,
    registry: str = DEFAULT_REGISTRY,
    cron: str = DEFAULT_CRON,
    public_account: str | None = None,
    policy: EgressPolicy | None = None,
) -> CdnSettings:
    """Make the account's CDN: the primary bucket (a directory by default, ``primary_url`` for
    another place), the staging bucket with a lifecycle rule deleting what is older than
    ``staging_days``, an existing ``mirror`` bucket (e.g. S3-compatible, made with ``conveyor r2
    bucket create --s3-url``), the registry and the cron. Running it again returns the CDN as it is."""
    account = account_of(cv)
    check_url(registry, policy)
    check_cron(cron)
    if not 1 <= staging_days <= 365:
        raise InvalidPackageConfig(f"staging_days: {staging_days} is not within 1..365")
    store = CdnStore.open(cv.deployment)
    try:
        settings = CdnSettings(
            account=account,
            primary_bucket=primary,
            staging_bucket=staging,
            mirror_bucket=mirror,
            registry=registry.rstrip("/"),
            cron=cron,
            public_account=public_account or account,
            staging_days=staging_days,
            created_ms=int(time.time() * 1000),
        )
        if mirror is not None:
            cv.bucket(mirror)  # BucketNotFound names it before anything is made
        _bucket(cv, primary, primary_url)
        staging_bucket = _bucket(cv, staging, staging_url)
        if not staging_bucket.lifecycle_rules():
            staging_bucket.add_lifecycle_rule(max_age_seconds=staging_days * DAY_SECONDS)
        ensure_compression(cv, staging)
        store.create_settings(settings)
        return store.settings(account)
    finally:
        store.close()


def status(cv: conveyor.Conveyor) -> dict[str, Any]:
    """The account's CDN settings, its package count and its versions by state."""
    store = CdnStore.open(cv.deployment)
    try:
        settings = store.settings(account_of(cv))
        packages, versions = store.counts(settings.account)
    finally:
        store.close()
    return {**dataclasses.asdict(settings), "packages": packages, "versions": versions}


def _read(path: Path) -> PackageConfig:
    try:
        data = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise InvalidPackageConfig(f"{path}: cannot be read: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise InvalidPackageConfig(f"{path}: is not JSON: {exc}") from None
    return PackageConfig.parse(data, source=str(path))


def add(cv: conveyor.Conveyor, path: str | Path, *, policy: EgressPolicy | None = None) -> list[str]:
    """Add (or replace) the package configs of a file or of a directory's ``**/*.json``; every one
    is checked before any is recorded, so one bad config adds none. Returns the names added.
    ``policy``: the egress policy a server applies to a tenant's git repository URLs (which may
    then not be local paths)."""
    root = Path(path)
    files = sorted(root.rglob("*.json")) if root.is_dir() else [root]
    if not files:
        raise InvalidPackageConfig(f"{root}: has no package config (*.json)")
    configs = [_read(file) for file in files]
    for config, file in zip(configs, files, strict=True):
        if config.source == "git":
            check_repository(config.target, policy, field=f"{file}: autoupdate.target")
    seen: dict[str, Path] = {}
    for config, file in zip(configs, files, strict=True):
        if config.name in seen:
            raise InvalidPackageConfig(f"{file}: name: {config.name!r} is also configured by {seen[config.name]}")
        seen[config.name] = file
    store = CdnStore.open(cv.deployment)
    try:
        account = store.settings(account_of(cv)).account
        now = int(time.time() * 1000)
        for config in configs:
            store.put_package(account, config, now_ms=now)
    finally:
        store.close()
    return [config.name for config in configs]


def update(
    cv: conveyor.Conveyor,
    *,
    registry: str | None = None,
    package: str | None = None,
    policy: EgressPolicy | None = None,
) -> str:
    """Start one PackageUpdatesWorkflow now (for every package, or ``package``), against
    ``registry`` instead of the CDN's if given; a worker running :func:`add_workflows` runs it.
    ``policy``: the egress policy a server applies to a tenant's registry URL."""
    store = CdnStore.open(cv.deployment)
    try:
        account = store.settings(account_of(cv)).account
        if package is not None:
            store.package(account, package)
    finally:
        store.close()
    if registry is not None:
        check_url(registry, policy)
    instance_id = f"update-{uuid.uuid4().hex}"
    cv.workflow(UPDATES_WORKFLOW).create(params={"registry": registry, "package": package}, id=instance_id)
    return instance_id


def publish(cv: conveyor.Conveyor, name: str, version: str) -> str:
    """Start PublishingWorkflow again for a processed or published version (a worker running
    :func:`add_workflows` runs it): what is published already stays, an object whose bytes would
    differ is refused and logged. Returns the instance id."""
    from conveyor.cdn.pipeline import PUBLISH_WORKFLOW, publish_id

    instance_id = f"{publish_id(account_of(cv), name, version)}-{uuid.uuid4().hex[:12]}"
    cv.workflow(PUBLISH_WORKFLOW).create(params={"name": name, "version": version}, id=instance_id)
    return instance_id


def update_and_wait(
    cv: conveyor.Conveyor, *, registry: str | None = None, package: str | None = None, timeout: float = 600.0
) -> dict[str, Any]:
    """:func:`update`, running the CDN's workflows and a compressor in this process until the
    update and every download and publish it started have ended: ``{"instance": id, "started":
    {name: [versions]}, "failed": {name: why}, "versions": {"name@version": "published" |
    "failed"}}``. ``TimeoutError`` past
    ``timeout`` seconds (the workflows go on with the next worker)."""
    from conveyor.cdn.pipeline import DOWNLOAD_WORKFLOW, PUBLISH_WORKFLOW, add_workflows, download_id, publish_id

    app = conveyor.App(cv, grace_period=5)
    add_workflows(app)
    add_compressor(app)
    app.start()
    try:
        instance_id = update(cv, registry=registry, package=package)
        deadline = time.monotonic() + timeout

        def ended(workflow: str, child: str) -> conveyor.InstanceStatus | None:
            while time.monotonic() < deadline:
                try:
                    found = cv.workflow(workflow).get(child).status()
                except conveyor.InstanceNotFound:  # its parent has not created it yet
                    found = None
                if found is not None and found.status in ("complete", "errored", "terminated"):
                    return found
                time.sleep(0.1)
            raise TimeoutError(f"{workflow} {child} has not ended after {timeout:.0f} s")

        update_status = ended(UPDATES_WORKFLOW, instance_id)
        assert update_status is not None
        output = update_status.output if isinstance(update_status.output, dict) else {"started": {}, "failed": {}}
        account = account_of(cv)
        states: dict[str, str] = {}
        for name, versions in output.get("started", {}).items():
            for version in versions:
                child = ended(DOWNLOAD_WORKFLOW, download_id(account, name, version))
                assert child is not None
                if child.status == "complete":
                    child = ended(PUBLISH_WORKFLOW, publish_id(account, name, version))
                    assert child is not None
                states[f"{name}@{version}"] = "published" if child.status == "complete" else "failed"
        return {"instance": instance_id, **output, "versions": states}
    finally:
        app.stop()
