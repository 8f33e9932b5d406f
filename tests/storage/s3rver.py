"""``s3rver`` (npm), a disk-backed S3-compatible server, as a subprocess on 127.0.0.1: the suite's
second real service, and the one that keeps its data across a restart. It is installed into
``.tools/node`` on first use (npm, pinned)."""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.npm_tools import TOOLS, npm_binary
from tests.storage.s3_server import S3Server, free_port

VERSION = "3.7.1"
PREFIX = TOOLS / "node"
# s3rver's one account.
KEY = "S3RVER"


def install() -> Path:
    return npm_binary(PREFIX, "s3rver", VERSION, "s3rver")


def start_s3rver(data: Path, logs: Path, port: int | None = None) -> S3Server:
    """s3rver keeping its buckets in ``data``; ``port`` to come back on the same address."""
    binary = install()
    port = port or free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with (logs / f"s3rver-{port}.log").open("ab") as output:
        process = subprocess.Popen(
            [str(binary), "-d", str(data), "-a", "127.0.0.1", "-p", str(port), "--no-vhost-buckets"],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(endpoint, timeout=1).close()
            break
        except urllib.error.HTTPError:
            break  # it answers
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"s3rver did not start; see {logs}") from None
            time.sleep(0.05)
    return S3Server(endpoint, KEY, KEY, process)
