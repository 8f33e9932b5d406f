"""``conveyor probe ...`` in-process against a SQLite deployment: targets added, imported, listed
and removed; a round now run by a real ``conveyor probe worker`` process; the report as a table
and as JSON; every refusal one ``error:`` line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from tests.cli.support import CONVEYOR_BIN, Cli
from tests.prober.conftest import Servers
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_targets_are_added_imported_listed_and_removed_from_the_command_line(tmp_path: Path) -> None:
    run = Cli(f"sqlite://{tmp_path / 'data'}")
    web = ("--fleet", "web")
    assert run.json("probe", "targets", "list", *web) == []
    added = run.json("probe", "targets", "add", "https://a.example.com/", "https://b.example.com/", *web)
    assert added == {"added": 2, "already_listed": 0}
    lines = tmp_path / "targets.txt"
    lines.write_text("# the edge\nhttps://c.example.com/health  # primary\n\nhttps://a.example.com/\n")
    out = run.ok("probe", "targets", "import", str(lines), "--interval", "30m", *web).stdout
    assert "Added 1 targets to fleet web (1 listed already)" in out
    objects = tmp_path / "targets.json"
    objects.write_text(json.dumps([{"address": "https://d.example.com/", "interval": "1d", "host": "edge"}]))
    assert run.json("probe", "targets", "import", str(objects), *web) == {"added": 1, "already_listed": 0}
    listed = {t["address"]: t for t in run.json("probe", "targets", "list", *web)}
    expected = ["https://a.example.com/", "https://b.example.com/", "https://c.example.com/health"]
    assert sorted(listed) == [*expected, "https://d.example.com/"]
    assert listed["https://c.example.com/health"]["interval_ms"] == 30 * 60_000
    edge = listed["https://d.example.com/"]
    assert (edge["host"], edge["interval_ms"]) == ("edge", 86_400_000)
    table = run.ok("probe", "targets", "list", *web).stdout
    assert "Fleet web: 4 targets" in table and "https://c.example.com/health" in table and "30m" in table
    first = listed["https://a.example.com/"]["id"]
    removed = run.json("probe", "targets", "remove", first, "https://b.example.com/", *web)
    assert removed == {"removed": ["https://a.example.com/ (http)", "https://b.example.com/ (http)"]}
    assert len(run.json("probe", "targets", "list", *web)) == 2
    fleets = run.json("probe", "fleets")
    assert [(f["fleet"], f["checks"], f["registered_ms"]) for f in fleets] == [("web", ["http"], None)]


def test_the_command_line_refuses_bad_targets_with_one_error_line(tmp_path: Path) -> None:
    run = Cli(f"sqlite://{tmp_path / 'data'}")
    assert "an http check's address is an http:// or https:// URL" in run.fails(
        "probe", "targets", "add", "https://ok.example.com/", "mcp.example.com", code=17001
    )
    assert "check 'signing' is not registered for this fleet (known: http)" in run.fails(
        "probe", "targets", "add", "mcp.example.com", "--check", "signing", code=17003
    )
    bad = tmp_path / "bad.json"
    bad.write_text('[{"address": "https://ok.example.com/"}, {"address": "https://x.example.com/", "every": "1h"}]')
    assert "target 2: unknown target field(s) 'every'" in run.fails("probe", "targets", "import", str(bad), code=17001)
    assert "no target with id or address 'nope'" in run.fails("probe", "targets", "remove", "nope", code=17002)
    assert "fleet 'default' has no worker yet" in run.fails("probe", "round", "--now", code=17004)
    assert run.json("probe", "targets", "list") == [], "nothing was added by any refused command"


def test_a_round_now_is_run_by_a_probe_worker_process_and_the_report_shows_it(tmp_path: Path, servers: Servers) -> None:
    url = f"sqlite://{tmp_path / 'data'}"
    run = Cli(url)
    ok, failing = servers(90, delay=0.2), servers(91, status=500)
    run.ok("probe", "targets", "add", ok.url, failing.url, "--interval", "0", "--fleet", "web")
    with (tmp_path / "worker.log").open("ab") as log:
        worker = subprocess.Popen(
            [str(CONVEYOR_BIN), "--url", url, "probe", "worker", "--fleet", "web", "--schedule", "", "--timeout", "5"],
            cwd=ROOT,
            env=os.environ,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: run.json("probe", "fleets")[0]["registered_ms"], timeout=30, what="the worker registered")
        summary = run.json("probe", "round", "--now", "--wait", "--timeout", "30", "--fleet", "web")
        assert summary["done"] and summary["jobs"] == 2 and summary["failed"] == 1 and summary["trigger"] == "now"
        text = run.ok("probe", "round", "--now", "--wait", "--fleet", "web").stdout
        assert "2 jobs (2 finished), 1 failed" in text and "19 × 5 × 3" in text
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0
    report = run.json("probe", "report", "--since", "1h", "--fleet", "web")
    assert (report["jobs"], report["runs"], report["finished"], report["failed"], report["accounted"]) == (
        4,
        4,
        4,
        2,
        True,
    )
    assert report["close_targets"] == 2 and report["host_overlaps"] == 0 and report["rounds"] == 2
    assert report["recent_failures"][0]["error"] == "HTTP 500"
    table = run.ok("probe", "report", "--since", "2026-01-01T00:00:00Z", "--fleet", "web").stdout
    for line in (
        "jobs vs runs",
        "4 jobs, 4 runs",
        "targets with two runs < 10m apart",
        "hosts with two jobs in flight",
    ):
        assert line in table
    assert "HTTP 500" in table and "round time (first job → last check)" in table
    assert "neither a duration" in run("probe", "report", "--since", "yesterday").stderr
