"""The browser the dashboard's tests drive: Debian's ``chromium``, installed with apt on first use
if it is missing (as tests/npm_tools.py installs npm tools), under a file lock so parallel test
workers install it once."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "dash"
CHROMIUM = "/usr/bin/chromium"


def chromium() -> str:
    """The path of Debian's chromium, installing the package first if it is not there."""
    if Path(CHROMIUM).exists():
        return CHROMIUM
    (ROOT / ".tools").mkdir(exist_ok=True)
    with (ROOT / ".tools" / ".chromium.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not Path(CHROMIUM).exists():
            sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            for command in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "chromium"]):
                done = subprocess.run([*sudo, *command], capture_output=True, text=True, timeout=900, env=env)
                if done.returncode != 0:
                    raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-4000:]}")
    found = shutil.which("chromium") or CHROMIUM
    if not Path(found).exists():
        raise RuntimeError("chromium is not installed and apt-get did not install it")
    return found


def screenshot_path(name: str) -> Path:
    """Where a test saves a screenshot (``test-artifacts/dash/``, not committed)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / f"{name}.png"
