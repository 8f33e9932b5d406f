"""One file through a tool in a child Python process: how the minifier and the image optimisers run.

>>> upper = "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read().upper())"
>>> run_tool(upper, "", b"ab", dest="x.txt", role="upper-caser", timeout=5.0)
b'AB'

The child is ``python -I -c <script> <argument>``: the file's bytes go in on stdin and the result
comes out on stdout, so nothing in a package is ever a path, an argument or code to the worker;
the child imports only its tool (``-I``: no user site, no environment variables, no current
directory on the path), and is killed after ``timeout`` seconds. A script reports a refusal as one
line on stderr with a non-zero exit status (the first line is the reason given).
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import subprocess
import sys


class ToolFailed(Exception):
    """The tool refused the file, crashed or ran out of time; the message names the file and why."""


@functools.cache
def installed_version(distribution: str) -> str | None:
    """The installed version of a tool's distribution (recorded with every file it made), or None."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def run_tool(
    script: str,
    argument: str,
    data: bytes,
    *,
    dest: str,
    role: str,
    timeout: float,
    env: dict[str, str] | None = None,
) -> bytes:
    """``script``'s stdout for ``data`` on its stdin; :class:`ToolFailed` (``"{dest}: why"``) if it
    exits non-zero or runs past ``timeout``. ``role`` names the tool in messages ("minifier")."""
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", script, argument],
            input=data,
            capture_output=True,
            timeout=timeout,
            env={"PATH": os.environ.get("PATH", ""), **(env or {})},
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ToolFailed(f"{dest}: the {role} ran out of its {timeout:g} s") from None
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ToolFailed(f"{dest}: {reason[0] if reason else f'the {role} exited {done.returncode}'}")
    return done.stdout
