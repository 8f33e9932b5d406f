"""``conveyor demo`` as ``make run`` runs it: a real process that must finish and exit 0."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import conveyor

from .support import CONVEYOR_BIN, Cli


def test_demo_runs_every_step_and_exits_0(tmp_path: Path) -> None:
    demo_dir = tmp_path / "demo"
    done = subprocess.run(
        [str(CONVEYOR_BIN), "demo", "--messages", "2000", "--dir", str(demo_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    for shown in ("Sending 2,000 orders", "payments-dlq", "redrove", "Conveyor demo results", "msg/s", "p99"):
        assert shown in done.stdout
    assert (demo_dir / "catalog.db").exists()


def test_demo_json_reports_what_happened(tmp_path: Path, run: Cli) -> None:
    result = run.ok("demo", "--messages", "1000", "--dir", str(tmp_path / "demo"), "--json")
    data = json.loads(result.stdout)
    assert data["send"]["messages"] == data["consume"]["messages"] == 1000
    assert data["send"]["rate"] > 0 and data["consume"]["rate"] > 0
    assert 0 < data["latency_idle_ms"]["p50"] <= data["latency_idle_ms"]["p99"]
    dead = data["dead_letter"]["dead_lettered"]
    assert dead == 4  # payments 0, 25, 50, 75 of 100 have expired cards
    assert data["redrive"] == {"redriven": dead, "charged_after_fix": dead, "dead_letter_backlog": 0}
    assert data["warnings"] == []  # the worker logged nothing but the failures the demo causes


def test_demo_wipes_its_directory_but_refuses_a_foreign_one(tmp_path: Path, run: Cli) -> None:
    demo_dir = tmp_path / "demo"
    with conveyor.connect(f"sqlite://{demo_dir}") as old:
        old.create_queue("orders")  # a queue the demo is about to create: it must start afresh
    run.ok("demo", "--messages", "100", "--dir", str(demo_dir), "--json")
    with conveyor.connect(f"sqlite://{demo_dir}") as fresh:
        assert fresh.queue("orders").counters().sent == 100
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.txt").write_text("years of work")
    result = run("demo", "--dir", str(precious))
    assert result.exit_code == 1 and "refusing to wipe" in result.stderr
    assert (precious / "thesis.txt").read_text() == "years of work"
