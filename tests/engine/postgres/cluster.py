"""The PostgreSQL server the tests run on: the one at ``$CONVEYOR_TEST_PG`` if it answers, else a
throw-away cluster of their own.

``$CONVEYOR_TEST_PG`` defaults to ``postgresql://127.0.0.1:5432/test``; ``CONVEYOR_TEST_PG=throwaway``
skips it. Where no server answers, :func:`server_url` starts one with the PostgreSQL binaries it
finds (``pg_config --bindir``, then ``initdb`` on ``PATH``, then Debian's ``/usr/lib/postgresql/*/bin``):
``initdb`` in a temporary directory (trust authentication, superuser ``postgres``, database ``test``),
``pg_ctl start`` on a free port of 127.0.0.1, and ``pg_ctl stop`` when the test process exits. No
distribution's service tools (``pg_ctlcluster``, systemd) are assumed, and no test skips: without
the binaries every PostgreSQL test fails with one line that says what to install.
"""

from __future__ import annotations

import atexit
import os
import pwd
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from glob import glob
from pathlib import Path

import psycopg
import pytest

from conveyor.server.testing import free_port

DEFAULT_URL = "postgresql://127.0.0.1:5432/test"
THROWAWAY = "throwaway"
SERVER_BINARIES = ("initdb", "pg_ctl", "postgres")
INSTALL_HINT = (
    "PostgreSQL's server binaries (initdb, pg_ctl, postgres) are not installed: install the PostgreSQL "
    "server (Debian/Ubuntu: apt-get install postgresql; Fedora: dnf install postgresql-server; macOS: "
    "brew install postgresql), put its bin directory on PATH, or point CONVEYOR_TEST_PG at a running server"
)

_url: str | None = None
_failure: str | None = None
_throwaway: Cluster | None = None


class ClusterError(RuntimeError):
    """A throw-away cluster could not be created or started (the message says which step and why)."""


def server_url() -> str:
    """The URL of the server the tests use, starting a throw-away cluster the first time if needed.

    Fails the calling test with one line (never skips it) if there is no server and none can be
    started, and fails every later caller the same way without trying again."""
    global _url, _failure, _throwaway
    if _url is not None:
        return _url
    if _failure is None:
        configured = os.environ.get("CONVEYOR_TEST_PG", DEFAULT_URL)
        try:
            if configured != THROWAWAY and answers(configured):
                _url = configured
            else:
                _throwaway = Cluster.start()
                atexit.register(_throwaway.stop)
                _url = _throwaway.url
        except ClusterError as exc:
            _failure = str(exc)
    if _url is None:
        pytest.fail(_failure, pytrace=False)
    return _url


def throwaway_cluster() -> Cluster | None:
    """The cluster :func:`server_url` started, if it had to."""
    return _throwaway


def answers(url: str, timeout: float = 3.0) -> bool:
    try:
        psycopg.connect(url, connect_timeout=max(1, int(timeout))).close()
    except psycopg.OperationalError:
        return False
    return True


def server_binaries(candidates: list[Path] | None = None) -> Path:
    """The first directory of ``candidates`` (default: where PostgreSQL installs them) holding
    ``initdb``, ``pg_ctl`` and ``postgres``, or :class:`ClusterError` naming what to install."""
    for directory in _candidate_directories() if candidates is None else candidates:
        if all(os.access(directory / name, os.X_OK) for name in SERVER_BINARIES):
            return directory
    raise ClusterError(INSTALL_HINT)


def _candidate_directories() -> list[Path]:
    candidates = []
    if pg_config := shutil.which("pg_config"):
        done = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        if done.returncode == 0:
            candidates.append(Path(done.stdout.strip()))
    if initdb := shutil.which("initdb"):
        candidates.append(Path(initdb).resolve().parent)

    def version(directory: str) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", directory))

    candidates += [Path(d) for d in sorted(glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)]
    return candidates


@dataclass
class Cluster:
    """A PostgreSQL cluster in a temporary directory, owned by this test process."""

    bin_dir: Path
    directory: Path
    port: int
    user: str | None  # the unprivileged account its processes run as when the tests run as root

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/test"

    @classmethod
    def start(cls) -> Cluster:
        """initdb, start and create database ``test``; the cluster is removed again if any step fails."""
        # initdb refuses to run as root; the cluster's files then belong to an unprivileged account.
        user = _unprivileged_account() if os.geteuid() == 0 else None
        cluster = cls(server_binaries(), Path(tempfile.mkdtemp(prefix="conveyor-test-pg-")), free_port(), user)
        try:
            if user is not None:
                shutil.chown(cluster.directory, user)
            cluster._run("initdb", "-D", str(cluster.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
            cluster._pg_ctl("start")  # -w: returns once the server accepts connections
            with psycopg.connect(f"postgresql://postgres@127.0.0.1:{cluster.port}/postgres", autocommit=True) as conn:
                conn.execute("CREATE DATABASE test")
        except psycopg.Error as exc:
            cluster.stop()
            raise ClusterError(f"a throw-away PostgreSQL cluster could not make database test: {exc}") from exc
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def restart(self) -> None:
        """Restart the server (``pg_ctl restart -m fast``): every connection is cut, as in a failover."""
        self._pg_ctl("restart", "-m", "fast")

    def stop(self) -> None:
        """Stop the server (if it runs) and remove its files."""
        if (self.data / "postmaster.pid").exists():
            self._pg_ctl("stop", "-m", "fast", check=False)
        shutil.rmtree(self.directory, ignore_errors=True)

    def _pg_ctl(self, action: str, *options: str, check: bool = True) -> None:
        server_options = f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.directory}"
        self._run(
            "pg_ctl", action, "-D", str(self.data), "-w", "-l", str(self.directory / "server.log"),
            "-o", server_options, *options, check=check,
        )  # fmt: skip

    def _run(self, program: str, *args: str, check: bool = True) -> None:
        command = [str(self.bin_dir / program), *args]
        done = subprocess.run(command, capture_output=True, text=True, user=self.user, timeout=120, check=False)
        if check and done.returncode != 0:
            log = self.directory / "server.log"
            detail = (done.stderr or done.stdout).strip() or (log.read_text()[-2000:] if log.exists() else "")
            raise ClusterError(f"a throw-away PostgreSQL cluster could not be made: {program} failed: {detail}")


def _unprivileged_account() -> str:
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise ClusterError("running as root, and neither a 'postgres' nor a 'nobody' account exists to run initdb as")
