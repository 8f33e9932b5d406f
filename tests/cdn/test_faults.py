"""Workers SIGKILLed mid-pipeline (real ``conveyor worker`` processes): one while it stages a tarball
the registry holds back, then others at random moments. Every version still ends ``published``
with each of its files recorded once, and the fan-in counter exact."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import conveyor
from conveyor import cdn
from conveyor.cdn.pipeline import PUBLISH_WORKFLOW, account_of, publish_id
from conveyor.cdn.store import CdnStore
from tests.cdn.conftest import Registry, build_tarball, package_config, write_config
from tests.waiting import wait_for

CONVEYOR = Path(sys.executable).with_name("conveyor")
ROOT = Path(__file__).resolve().parents[2]
APP = """
import sys
sys.path.insert(0, {root!r})
import conveyor
cv = conveyor.connect({url!r})
app = conveyor.App(cv, grace_period=1)
conveyor.cdn.add_workflows(app, visibility_timeout_ms=1500)
conveyor.cdn.add_compressor(app, visibility_timeout_ms=1500)
"""


def _worker(tmp_path: Path, url: str) -> subprocess.Popen[bytes]:
    (tmp_path / "cdn_app.py").write_text(APP.format(url=url, root=str(ROOT)))
    with (tmp_path / "worker.log").open("ab") as out:
        return subprocess.Popen(
            [str(CONVEYOR), "--url", url, "worker", "cdn_app:app"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT
        )


def test_workers_killed_mid_pipeline_leave_every_version_published_with_each_file_once(
    tmp_path: Path, registry: Registry
) -> None:
    url = f"sqlite://{tmp_path / 'data'}"
    versions = ["1.0.0", "1.1.0", "1.2.0"]
    files = {f"dist/part{i}.js": f"part {i}".encode() for i in range(6)}
    for version in versions:
        registry.publish("widget", version, build_tarball({**files, "dist/version.js": version.encode()}))
    held = threading.Event()
    registry.hold = held  # the first tarball request waits for this
    with conveyor.connect(url) as cv:
        cdn.init(cv, registry=registry.url)
        cdn.add(cv, write_config(tmp_path, package_config("widget", ["*.js"])))
        worker = _worker(tmp_path, url)
        try:

            def started() -> bool:
                try:
                    cdn.update(cv)
                except conveyor.WorkflowNotFound:  # the worker has not registered the workflows yet
                    return False
                return True

            wait_for(started, 30, "the worker to start", poll=0.05)
            wait_for(lambda: registry.waiting, 30, "a staging download", poll=0.05)  # the worker is staging a tarball
            worker.kill()
            worker.wait()
            held.set()
            rng = random.Random(7)
            for _ in range(3):  # more workers, each killed at a random moment
                worker = _worker(tmp_path, url)
                time.sleep(rng.uniform(0.5, 1.5))
                worker.kill()
                worker.wait()
            worker = _worker(tmp_path, url)
            account = account_of(cv)

            def all_ended() -> bool:
                try:
                    return all(
                        cv.workflow(PUBLISH_WORKFLOW).get(publish_id(account, "widget", v)).status().status
                        in ("complete", "errored")
                        for v in versions
                    )
                except conveyor.InstanceNotFound:
                    return False

            wait_for(all_ended, 90, "every version to end", poll=0.05)
        finally:
            worker.kill()
            worker.wait()
        store = CdnStore.open(cv.deployment)
        try:
            assert {r.version: r.state for r in store.versions(account, "widget")} == dict.fromkeys(
                versions, "published"
            )
            for version in versions:
                recorded = store.files(account, "widget", version)
                assert [f.dest for f in recorded] == sorted([*(p.removeprefix("dist/") for p in files), "version.js"])
        finally:
            store.close()
