"""npm tools the suite runs (wrangler, s3rver, Node itself), installed pinned into ``.tools/`` on
first use. Test workers run in parallel (pytest-xdist), so an install takes a file lock: the first
worker installs, the others wait for it and then find the binary there."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[1] / ".tools"


def npm_binary(prefix: Path, package: str, version: str, binary: str) -> Path:
    """``prefix/node_modules/.bin/binary``, installing ``package@version`` under ``prefix`` first if
    it is not there yet."""
    path = prefix / "node_modules" / ".bin" / binary
    if path.exists():
        return path
    prefix.mkdir(parents=True, exist_ok=True)
    with (prefix.parent / f".{prefix.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            npm = shutil.which("npm")
            if npm is None:
                raise RuntimeError(f"npm (Node.js) is needed to install {package}")
            done = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), f"{package}@{version}"],
                capture_output=True,
                text=True,
                timeout=600,
            )
            if done.returncode != 0:
                raise RuntimeError(f"npm install {package}@{version} failed:\n{done.stderr[-4000:]}")
    return path
