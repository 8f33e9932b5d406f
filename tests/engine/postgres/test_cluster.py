"""The tests' PostgreSQL: a throw-away cluster where no server answers, found by its binaries."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from conveyor.server.testing import closed_port
from tests.engine.postgres.cluster import INSTALL_HINT, Cluster, ClusterError, answers, server_binaries

ROOT = Path(__file__).resolve().parents[3]  # where the package `tests` is importable from

SCRIPT = """
from tests.engine.postgres.cluster import server_url, throwaway_cluster
print(server_url())
print(throwaway_cluster().directory)
"""


def test_a_throwaway_cluster_serves_database_test_survives_a_restart_and_is_removed_when_stopped() -> None:
    cluster = Cluster.start()
    try:
        with psycopg.connect(cluster.url) as conn:
            assert conn.execute("SELECT current_database(), current_setting('port')").fetchone() == (
                "test",
                str(cluster.port),
            )
        cluster.restart()
        assert answers(cluster.url)
    finally:
        cluster.stop()
    assert not cluster.directory.exists()
    assert not answers(cluster.url)


def test_with_no_server_at_the_configured_url_the_tests_get_a_cluster_that_is_gone_when_they_exit() -> None:
    with closed_port() as port:
        closed = f"postgresql://127.0.0.1:{port}/test"
        environment = {**os.environ, "CONVEYOR_TEST_PG": closed, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=environment, timeout=120, check=False
        )
    assert done.returncode == 0, done.stderr
    url, directory = done.stdout.splitlines()
    assert url.startswith("postgresql://postgres@127.0.0.1:") and url != closed
    assert not Path(directory).exists()
    assert not answers(url)


def test_without_the_server_binaries_the_error_is_one_line_saying_what_to_install(tmp_path: Path) -> None:
    (tmp_path / "initdb").write_text("#!/bin/sh\n")  # a directory with some, not all, of them
    os.chmod(tmp_path / "initdb", 0o755)
    with pytest.raises(ClusterError) as refused:
        server_binaries([tmp_path])
    assert str(refused.value) == INSTALL_HINT
    assert "\n" not in INSTALL_HINT and "install the PostgreSQL server" in INSTALL_HINT
