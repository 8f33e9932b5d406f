"""``conveyor cdn run`` as a real process on a fresh SQLite directory: it refuses a deployment
without a CDN (saying what to run), then workflows, compressors and the server in one command
publish a package from a registry-shaped server and serve it (on SQLite and on PostgreSQL), and
SIGTERM stops every part; a cdn run SIGKILLed mid-pipeline leaves its work to the next."""

from __future__ import annotations

import subprocess
import threading
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest

import conveyor
from conveyor import cdn
from tests.cdn.conftest import (
    Registry,
    bucket_urls,
    build_tarball,
    cdn_command,
    deployment_url,
    package_config,
    write_config,
)
from tests.cli.support import Cli
from tests.waiting import wait_for


def compressor_pids(parent: int) -> list[int]:
    """The compressor processes ``parent`` started (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"conveyor.cdn.runner" in command:
            found.append(int(entry.name))
    return found


def gone(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def cdn_run(url: str, log: Path, *options: str) -> AbstractContextManager[tuple[subprocess.Popen[bytes], str]]:
    """``conveyor cdn run`` on a free port, with the URL it says it serves on."""
    return cdn_command(url, log, "run", *options)


def test_cdn_run_refuses_a_deployment_without_a_cdn(tmp_path: Path) -> None:
    run = Cli(f"sqlite://{tmp_path / 'data'}")
    message = run.fails("cdn", "run", "--port", "0", code=17002)
    assert "run `conveyor cdn init` first" in message
    assert "--compressors" in run("cdn", "run", "--compressors", "65").output  # a usage error naming it


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_cdn_run_publishes_serves_and_stops_on_sigterm(
    engine: str, tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    with conveyor.connect(deployment_url(engine, tmp_path, monkeypatch)) as cv:
        run_and_serve(cv, tmp_path, registry)


def run_and_serve(cv: conveyor.Conveyor, tmp_path: Path, registry: Registry) -> None:
    script = b"function double(longName) {\n  return longName * 2;\n}\n" * 50
    registry.publish("gadget", "1.0.0", build_tarball({"dist/gadget.js": script, "dist/gadget.css": b"a { }\n"}))
    cdn.init(cv, registry=registry.url, **bucket_urls(cv))  # type: ignore[arg-type]
    cdn.add(cv, write_config(tmp_path, package_config("gadget", ["*"])))
    url = cv.url

    with cdn_run(url, tmp_path / "run.log", "--compressors", "2") as (process, served):
        compressors = compressor_pids(process.pid)
        assert len(compressors) == 2

        def published() -> bool:
            return httpx.get(f"{served}/libraries/gadget/1.0.0").status_code == 200

        wait_for(published, 120, "gadget@1.0.0 to be published by the update run starts", poll=0.2)
        plain = httpx.get(f"{served}/ajax/libs/gadget/1.0.0/gadget.js", headers={"Accept-Encoding": "identity"})
        assert plain.status_code == 200 and plain.content == script
        compressed = httpx.get(f"{served}/ajax/libs/gadget/1.0.0/gadget.min.js", headers={"Accept-Encoding": "br"})
        assert compressed.headers["content-encoding"] == "br"
        minified = compressed.content  # httpx decodes br and gzip
        assert 0 < len(minified) < len(script)
        zipped = httpx.get(f"{served}/ajax/libs/gadget/1.0.0/gadget.css", headers={"Accept-Encoding": "gzip"})
        assert zipped.headers["content-encoding"] == "gzip" and zipped.content == b"a { }\n"
        assert httpx.get(f"{served}/libraries/gadget").json()["version"] == "1.0.0"

        process.terminate()
        assert process.wait(90) == 0, (tmp_path / "run.log").read_text()
    for child in compressors:  # the compressors stopped with it
        wait_for(lambda child=child: gone(child), 30, f"compressor {child} to exit")  # type: ignore[misc]
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{served}/stats")
    assert cdn.status(cv)["versions"] == {"published": 1}


def test_a_killed_cdn_run_leaves_its_work_to_the_next(tmp_path: Path, registry: Registry) -> None:
    registry.publish("gadget", "1.0.0", build_tarball({"dist/gadget.js": b"var gadget = 1;\n" * 20}))
    registry.hold = threading.Event()  # the tarball's download waits until released
    url = f"sqlite://{tmp_path / 'data'}"
    run = Cli(url)
    run.json("cdn", "init", "--registry", registry.url)
    run.json("cdn", "add", str(write_config(tmp_path, package_config("gadget", ["*"]))))
    fast = ("--compressors", "1", "--visibility-timeout", "2")

    with cdn_run(url, tmp_path / "first.log", *fast) as (first, _):
        compressors = compressor_pids(first.pid)
        wait_for(lambda: registry.waiting, 60, "the download to ask for the tarball", poll=0.05)
        first.kill()  # mid-pipeline: the download's first step is running
        first.wait()
    for pid in compressors:  # orphaned, they stop by themselves
        wait_for(lambda pid=pid: gone(pid), 30, f"compressor {pid} to stop")  # type: ignore[misc]
    registry.hold.set()

    with cdn_run(url, tmp_path / "second.log", *fast, "--no-update-now") as (second, served):

        def published() -> bool:
            return httpx.get(f"{served}/libraries/gadget/1.0.0").status_code == 200

        wait_for(published, 120, "the next cdn run to publish gadget@1.0.0", poll=0.2)
        assert httpx.get(f"{served}/libraries/gadget").json()["versions"] == ["1.0.0"]
        second.terminate()
        assert second.wait(90) == 0, (tmp_path / "second.log").read_text()
    assert run.json("cdn", "status")["versions"] == {"published": 1}
