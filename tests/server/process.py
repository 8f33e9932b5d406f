"""A real ``conveyor serve`` process on 127.0.0.1, started the way a user starts it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from conveyor.server.testing import free_port

CONVEYOR = str(Path(sys.executable).with_name("conveyor"))


@dataclass
class ServeProcess:
    url: str
    token: str
    account_id: str
    process: subprocess.Popen[bytes]
    data: Path
    log: Path

    def output(self) -> str:
        """What the server wrote to stdout and stderr so far."""
        return self.log.read_text()

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")


def create_token(data: Path, account: str, *extra: str, url: str | None = None) -> str:
    """A token made by ``conveyor tokens create`` on the deployment (``data``, or ``url``)."""
    out = subprocess.run(
        [CONVEYOR, "--url", url or f"sqlite://{data}", "tokens", "create", "--account", account, *extra],
        check=True,
        capture_output=True,
        text=True,
        cwd=data.parent,
    ).stdout
    return out.strip().splitlines()[-1]


@contextmanager
def serve_process(
    data: Path,
    account: str = "acc1",
    *args: str,
    url: str | None = None,
    open_files: int | None = None,
    cwd: Path | None = None,
) -> Iterator[ServeProcess]:
    """``conveyor serve`` on the SQLite directory ``data`` (or on ``url``; its log beside ``data``),
    with its open-file limit (soft and hard) set to ``open_files`` if given, run in ``cwd`` (default:
    the directory that holds ``data``, so nothing a server writes by default lands in the repository)."""
    data.mkdir(parents=True, exist_ok=True)
    token = create_token(data, account, url=url)
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log = open(data.parent / f"serve-{port}.log", "wb")  # noqa: SIM115 - closed below
    limit = ["prlimit", f"--nofile={open_files}:{open_files}"] if open_files else []
    process = subprocess.Popen(
        [*limit, CONVEYOR, "--url", url or f"sqlite://{data}", "serve", "--port", str(port), *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=cwd or data.parent,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60  # a loaded machine starts a server slowly
        while True:
            try:
                httpx.get(url + "/healthz", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"conveyor serve did not start: {Path(log.name).read_text()}") from None
                time.sleep(0.05)
        yield ServeProcess(url, token, account, process, data, Path(log.name))
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
