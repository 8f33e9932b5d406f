"""Fixtures of the package CDN's suite: an npm-registry-shaped HTTP server on 127.0.0.1 serving
tarballs built here with ``tarfile``, and a deployment on each engine."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest
import uvicorn

import conveyor
from conveyor import cdn
from conveyor.cdn.server import CdnApp, server_config
from conveyor.server.testing import free_port
from conveyor.storage.service import SHARED_DIRECTORIES_VARIABLE
from tests.engine.postgres.support import ThrowawayEngine
from tests.storage.conftest import make_bucket
from tests.storage.conftest import s3_server as s3_server  # the moto_server of the mirror buckets
from tests.storage.deployments import deployment_client
from tests.storage.s3_server import S3Server
from tests.waiting import wait_for


def build_tarball(files: dict[str, bytes], *, extra: Callable[[tarfile.TarFile], None] | None = None) -> bytes:
    """A gzip'd npm tarball with ``files`` under ``package/``."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for path, data in files.items():
            info = tarfile.TarInfo(f"package/{path}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        if extra is not None:
            extra(archive)
    return out.getvalue()


def integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


class Registry:
    """Packuments and tarballs served at ``url``; ``publish`` adds a version."""

    def __init__(self) -> None:
        self.packages: dict[str, dict[str, dict[str, Any]]] = {}
        self.tarballs: dict[str, bytes] = {}
        self.hold: threading.Event | None = None  # while set and not yet released, tarballs wait
        self.waiting = False  # a tarball request is waiting on ``hold``
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.lstrip("/")
                if path in registry.tarballs and registry.hold is not None and not registry.hold.is_set():
                    registry.waiting = True
                    registry.hold.wait(30)
                if path in registry.tarballs:
                    body, kind = registry.tarballs[path], "application/octet-stream"
                elif path in registry.packages:
                    body = orjson.dumps({"name": path, "versions": registry.packages[path]})
                    kind = "application/json"
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def publish(self, name: str, version: str, data: bytes, *, dist: dict[str, Any] | None = None) -> None:
        path = f"{name}/-/{name}-{version}.tgz"
        self.tarballs[path] = data
        self.packages.setdefault(name, {})[version] = {
            "name": name,
            "version": version,
            "dist": dist if dist is not None else {"tarball": f"{self.url}/{path}", "integrity": integrity(data)},
        }

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def registry() -> Iterator[Registry]:
    server = Registry()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def cv(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[conveyor.Conveyor]:
    with deployment_client(request.param, tmp_path, monkeypatch) as client:
        yield client


def bucket_urls(cv: conveyor.Conveyor) -> dict[str, str | None]:
    """Where init's buckets go: the deployment's own directories on SQLite, declared shared ones on
    PostgreSQL."""
    if cv.deployment.kind == "sqlite":
        return {"primary_url": None, "staging_url": None}
    shared = Path(os.environ[SHARED_DIRECTORIES_VARIABLE])
    return {"primary_url": (shared / "cdn").as_uri(), "staging_url": (shared / "cdn-staging").as_uri()}


def package_config(name: str, files: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"{name} for tests",
        "keywords": ["test"],
        "repository": {"type": "git", "url": f"https://example.com/{name}.git"},
        "autoupdate": {"source": "npm", "target": name, "fileMap": [{"basePath": "dist", "files": files}]},
        **extra,
    }


def write_config(root: Path, config: dict[str, Any]) -> Path:
    name: str = config["name"]
    path = root / "packages" / name[0].lower() / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(config))
    return path


def s3_bucket(cv: conveyor.Conveyor, s3: S3Server, name: str) -> conveyor.Bucket:
    """Bucket ``name`` of the deployment on a fresh bucket of ``s3``."""
    return make_bucket(cv, "s3", name, Path("unused"), s3)


@contextmanager
def worker(cv: conveyor.Conveyor, *, compressor: bool = True) -> Iterator[conveyor.App]:
    """The CDN's workflows (and, unless ``compressor`` is False, a compressor) running in this process."""
    app = conveyor.App(cv, grace_period=5)
    cdn.add_workflows(app, visibility_timeout_ms=2000)
    if compressor:
        cdn.add_compressor(app)
    app.start()
    try:
        yield app
    finally:
        app.stop()


def ended(cv: conveyor.Conveyor, workflow: str, instance_id: str, timeout: float = 90) -> str:
    """The status an instance ended with (complete, errored or terminated)."""
    status: list[str] = []

    def done() -> bool:
        try:
            status[:] = [cv.workflow(workflow).get(instance_id).status().status]
        except conveyor.InstanceNotFound:  # its parent has not created it yet
            return False
        return status[0] in ("complete", "errored", "terminated")

    wait_for(done, timeout, f"{workflow} {instance_id} to end", poll=0.05)
    return status[0]


@dataclass
class CdnServer:
    url: str
    app: CdnApp


@contextmanager
def cdn_server(cv: conveyor.Conveyor, **options: Any) -> Iterator[CdnServer]:
    """``cdn serve``'s app on a free port of 127.0.0.1 in a thread, under the project's uvicorn set-up."""
    app = CdnApp(cv, **options)
    port = free_port()
    server = uvicorn.Server(server_config(app, "127.0.0.1", port))  # as cdn serve runs it
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, 30, "the CDN server to listen", poll=0.02)
        yield CdnServer(f"http://127.0.0.1:{port}", app)
    finally:
        server.should_exit = True
        thread.join(30)
        app.close()


def deployment_url(engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh deployment's URL for processes that connect by URL (as account "local"): a SQLite
    directory, or a throwaway PostgreSQL schema with the buckets in shared directories."""
    monkeypatch.setenv(SHARED_DIRECTORIES_VARIABLE, str(tmp_path / "shared"))
    if engine == "sqlite":
        return f"sqlite://{tmp_path / 'data'}"
    throwaway = ThrowawayEngine()
    url = throwaway.url
    throwaway.close()
    return url


@contextmanager
def cdn_command(
    url: str, log: Path, command: str, *options: str, timeout: float = 120
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``conveyor cdn COMMAND`` (``run`` or ``serve``) on a free port as a real process, with the
    URL it says it serves on; killed at the end if it is still running."""
    conveyor_command = Path(sys.executable).with_name("conveyor")
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(conveyor_command), "--url", url, "cdn", command, "--port", "0", *options],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        found: list[str] = []

        def listening() -> bool:
            found[:] = re.findall(r"serving the CDN on (http://\S+)", log.read_text())
            return bool(found) or process.poll() is not None

        wait_for(listening, timeout, f"cdn {command} to serve", poll=0.05)
        assert found, log.read_text()
        yield process, found[0]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
