"""Real npm tarballs for the CDN's end-to-end test: ``npm pack NAME@VERSION`` from the npm
registry on first use, into ``.tools/cdn-tarballs/``, each checked against the sha512 recorded
here (the registry's ``dist.integrity``), so every run tests the same bytes. Test workers run in
parallel, so a fetch takes a file lock: the first worker fetches, the others find the file."""

from __future__ import annotations

import base64
import fcntl
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.npm_tools import TOOLS

TARBALLS = TOOLS / "cdn-tarballs"

# (name, version) → the registry's dist.integrity of its tarball.
PINNED = {
    (
        "jquery",
        "3.6.4",
    ): "sha512-v28EW9DWDFpzcD9O5iyJXg3R3+q+mET5JhnjJzQUZMHOv67bpSIHq81GEYpPNZHG+XXHsfSme3nxp/hndKEcsQ==",
    (
        "jquery",
        "3.7.0",
    ): "sha512-umpJ0/k8X0MvD1ds0P9SfowREz2LenHsQaxSohMZ5OMNEU2r0tf8pdeEFTHMFxWVxKNyU9rTtK3CWzUCTKJUeQ==",
    (
        "jquery",
        "3.7.1",
    ): "sha512-m4avr8yL8kmFN8psrbFFFmB/If14iN5o9nw/NgnnM+kybDJpRsAynV2BsfpTYrTRysYUdADVD7CkUUizgkpLfg==",
    (
        "bootstrap",
        "5.3.1",
    ): "sha512-jzwza3Yagduci2x0rr9MeFSORjcHpt0lRZukZPZQJT1Dth5qzV7XcgGqYzi39KGAVYR8QEDVoO0ubFKOxzMG+g==",
    (
        "bootstrap",
        "5.3.2",
    ): "sha512-D32nmNWiQHo94BKHLmOrdjlL05q1c8oxbtBphQFb9Z5to6eGRDCm0QgeaZ4zFBHzfg2++rqa2JkqCcxDy0sH0g==",
    (
        "bootstrap",
        "5.3.3",
    ): "sha512-8HLCdWgyoMguSO9o+aH+iuZ+aht+mzW0u3HIMzVu7Srrpv7EBBxTnrFlSCskwdY1+EOFQSm7uMJhNQHkdPcmjg==",
    (
        "lodash",
        "4.17.19",
    ): "sha512-JNvd8XER9GQX0v2qJgsaN/mzFCNA5BRe/j8JN9d+tWyGLSodKQHKFicdwNYzWwI3wjRnaKPsGj1XkBjx/F96DQ==",
    (
        "lodash",
        "4.17.20",
    ): "sha512-PlhdFcillOINfeV7Ni6oF1TAEayyZBoZ8bcshTHqOYJYlrqzRK5hagpagky5o4HfCzzd1TRkXPMFq6cKk9rGmA==",
    (
        "lodash",
        "4.17.21",
    ): "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXPs17LhbZVGedAJv8XZ1tvj5FvSg==",
}


def sha512_integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def npm_tarball(name: str, version: str) -> bytes:
    """The bytes of ``name@version``'s npm tarball (pinned in :data:`PINNED`), fetched once."""
    expected = PINNED[(name, version)]
    path = TARBALLS / f"{name}-{version}.tgz"
    if not path.exists():
        TARBALLS.mkdir(parents=True, exist_ok=True)
        with (TARBALLS / ".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not path.exists():
                npm = shutil.which("npm")
                if npm is None:
                    raise RuntimeError(f"npm (Node.js) is needed to fetch {name}@{version}")
                with tempfile.TemporaryDirectory(dir=TARBALLS) as scratch:
                    done = subprocess.run(
                        [npm, "pack", f"{name}@{version}", "--pack-destination", scratch],
                        capture_output=True,
                        text=True,
                        timeout=600,
                        cwd=scratch,
                    )
                    if done.returncode != 0:
                        raise RuntimeError(f"npm pack {name}@{version} failed:\n{done.stderr[-4000:]}")
                    packed = Path(scratch) / f"{name}-{version}.tgz"
                    if sha512_integrity(packed.read_bytes()) != expected:
                        raise RuntimeError(f"npm pack {name}@{version}: not the pinned tarball ({expected})")
                    packed.rename(path)
    data = path.read_bytes()
    if sha512_integrity(data) != expected:
        raise RuntimeError(f"{path}: not the pinned tarball of {name}@{version}: delete it to fetch it again")
    return data
