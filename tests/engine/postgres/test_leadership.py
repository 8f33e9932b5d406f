"""Coordinator leadership: one advisory-lock holder per deployment; a killed leader is replaced."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conveyor.engine.postgres import PostgresEngine

# A worker process's coordinator: prints LEADER once it holds leadership, then keeps running.
COORDINATOR = """
import sys, time
from conveyor.broker import coordinator
from conveyor.engine.postgres import PostgresEngine

coordinator.LEADERSHIP_RETRY = 0.5
c = coordinator.Coordinator(PostgresEngine(sys.argv[1]))
c.start()
while not c.leader:
    time.sleep(0.05)
print("LEADER", flush=True)
time.sleep(600)
"""


def test_one_engine_leads_a_deployment_at_a_time(pg_url: str) -> None:
    first, second = PostgresEngine(pg_url), PostgresEngine(pg_url)
    try:
        assert first.acquire_leadership()
        assert first.acquire_leadership()
        assert not second.acquire_leadership()
        first.release_leadership()
        assert second.acquire_leadership()
        assert not first.acquire_leadership()
    finally:
        first.close()
        second.close()


def test_deployments_in_different_schemas_elect_separately(pg_url: str, schema: str) -> None:
    from tests.engine.postgres.support import drop_schema, new_schema, schema_url

    other = new_schema()
    here, there = PostgresEngine(pg_url), PostgresEngine(schema_url(other))
    try:
        assert here.acquire_leadership()
        assert there.acquire_leadership()
    finally:
        here.close()
        there.close()
        drop_schema(other)


def _start(pg_url: str, tmp_path: Path, name: str) -> tuple[subprocess.Popen[str], Path]:
    out = tmp_path / f"{name}.out"
    proc = subprocess.Popen(
        [sys.executable, "-c", COORDINATOR, pg_url], stdout=out.open("w"), stderr=subprocess.STDOUT, text=True
    )
    return proc, out


def _wait_for_leader(out: Path, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if "LEADER" in out.read_text():
            return True
        time.sleep(0.1)
    return False


def test_a_killed_coordinator_process_is_replaced_by_another(pg_url: str, tmp_path: Path) -> None:
    PostgresEngine(pg_url).close()  # migrate once, before the processes race
    leader, leader_out = _start(pg_url, tmp_path, "first")
    follower = None
    try:
        assert _wait_for_leader(leader_out, 60), leader_out.read_text()
        follower, follower_out = _start(pg_url, tmp_path, "second")
        time.sleep(2.0)  # the follower is up and has tried (and failed) to lead
        assert "LEADER" not in follower_out.read_text(), "two coordinators at once"
        os.kill(leader.pid, signal.SIGKILL)
        leader.wait()
        assert _wait_for_leader(follower_out, 60), follower_out.read_text()
    finally:
        for proc in (leader, follower):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def test_leadership_lost_with_its_connection_goes_to_whoever_asks_first(pg_url: str, schema: str) -> None:
    from tests.engine.postgres.support import terminate_connections

    first, second = PostgresEngine(pg_url), PostgresEngine(pg_url)
    try:
        assert first.acquire_leadership()
        terminate_connections(schema)  # as a server restart would
        assert second.acquire_leadership()
        assert not first.acquire_leadership()
    finally:
        first.close()
        second.close()
