"""Several machines on one PostgreSQL, with failures (``pytest -m simulation -s tests/engine/postgres``).

Three worker processes (``sim_worker.py``), two producer processes (``sim_producer.py``: one writing
to PostgreSQL directly, one through the HTTP servers) and two ``conveyor serve`` processes share one
database. While they run, workers are SIGKILLed at random (and started again, as a supervisor
would), one server is SIGKILLed (and started again), and PostgreSQL itself is restarted with
``pg_ctl restart`` — a throw-away cluster of the test's own (``cluster.py``), so that no other user of
the machine's server sees the restart. Nobody is told: clients reconnect by themselves. Then the audit: every
send a producer saw acknowledged was handled by some worker at least once.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import conveyor
from conveyor.engine.postgres import PostgresEngine
from conveyor.server.accounts import AccountEngine
from conveyor.server.testing import free_port
from tests.engine.postgres.cluster import Cluster

HERE = Path(__file__).parent
PER_PRODUCER = 20_000


CONVEYOR = str(Path(sys.executable).parent / "conveyor")


def start(args: list[str], log: Path, program: str = sys.executable) -> subprocess.Popen[bytes]:
    return subprocess.Popen([program, *args], stdout=log.open("ab"), stderr=subprocess.STDOUT)


def serve(url: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    return start(["--url", url, "serve", "--port", str(port), "--no-auth"], log, CONVEYOR)


def wait_http(port: int, timeout: float = 60) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise AssertionError(f"conveyor serve on port {port} did not come up")


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A PostgreSQL server of this test's own, which it may restart."""
    own = Cluster.start()
    try:
        yield own
    finally:
        own.stop()


def lines(paths: list[Path]) -> list[str]:
    return [line for p in paths for line in p.read_text().splitlines() if line]


@pytest.mark.simulation
@pytest.mark.timeout(1200)
def test_machines_and_postgres_fail_and_every_acknowledged_send_is_handled(cluster: Cluster, tmp_path: Path) -> None:
    pg_url = cluster.url
    rng = random.Random(4)
    audit, logs = tmp_path / "audit", tmp_path / "logs"
    audit.mkdir()
    logs.mkdir()
    setup = conveyor.Conveyor(AccountEngine(PostgresEngine(pg_url), "sim"), pg_url)
    queue = setup.create_queue("jobs")
    ports = [free_port(), free_port()]
    servers = [serve(pg_url, port, logs / f"server-{i}.log") for i, port in enumerate(ports)]
    for port in ports:
        wait_http(port)
    workers = [start([str(HERE / "sim_worker.py"), pg_url, str(audit)], logs / f"worker-{i}.log") for i in range(3)]
    http_targets = ",".join(f"http://127.0.0.1:{port}" for port in ports)
    producers = [
        start([str(HERE / "sim_producer.py"), "direct", str(PER_PRODUCER), str(audit), pg_url], logs / "p-direct.log"),
        start(
            [str(HERE / "sim_producer.py"), "http", str(PER_PRODUCER), str(audit), http_targets], logs / "p-http.log"
        ),
    ]
    events: list[str] = []
    started = time.monotonic()
    postgres_restarted = server_killed = False
    try:
        while any(p.poll() is None for p in producers):
            time.sleep(rng.uniform(1.5, 3.0))
            elapsed = time.monotonic() - started
            victim = rng.randrange(len(workers))
            os.kill(workers[victim].pid, signal.SIGKILL)
            workers[victim].wait()
            workers[victim] = start([str(HERE / "sim_worker.py"), pg_url, str(audit)], logs / f"worker-{victim}.log")
            events.append(f"{elapsed:.0f}s: SIGKILL worker {victim}, restarted")
            if not server_killed and elapsed > 6:
                os.kill(servers[1].pid, signal.SIGKILL)
                servers[1].wait()
                events.append(f"{elapsed:.0f}s: SIGKILL server 1")
                servers[1] = serve(pg_url, ports[1], logs / "server-1.log")
                server_killed = True
            elif server_killed and not postgres_restarted and elapsed > 12:
                cluster.restart()
                events.append(f"{time.monotonic() - started:.0f}s: PostgreSQL restarted")
                postgres_restarted = True
        for p in producers:
            assert p.wait() == 0
        acked = set(lines(sorted(audit.glob("acked-*.log"))))
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            handled = set(lines(sorted(audit.glob("handled-*.log"))))
            if acked <= handled and queue.metrics().backlog_count == 0:
                break
            time.sleep(1)
    finally:
        for proc in [*workers, *servers, *producers]:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in [*workers, *servers, *producers]:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    handled_lines = lines(sorted(audit.glob("handled-*.log")))
    handled = set(handled_lines)
    counts = Counter(handled_lines)
    report = {
        "acknowledged_sends": len(acked),
        "handled_distinct": len(handled),
        "handled_total": len(handled_lines),
        "handled_more_than_once": sum(1 for c in counts.values() if c > 1),
        "acknowledged_but_never_handled": len(acked - handled),
        "postgres_restarted": postgres_restarted,
        "server_killed": server_killed,
        "events": events,
        "seconds": round(time.monotonic() - started),
    }
    print(json.dumps(report))
    setup.close()
    assert postgres_restarted and server_killed
    assert len(acked) == 2 * PER_PRODUCER
    assert acked - handled == set()
