"""The README's first run, end to end, as a new user types it: the producer sends ten orders, a
``conveyor worker`` of the example app handles them, and order 7 ends in the dead letter queue."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import conveyor

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BIN = Path(sys.executable).parent


def test_the_readme_first_run_handles_every_order_and_dead_letters_order_7(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    sent = subprocess.run(
        [BIN / "python", "examples/producer.py"], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert sent.stdout.count("sent order") == 10 and "backlog: 10 messages" in sent.stdout

    worker = subprocess.Popen(
        [BIN / "conveyor", "worker", "examples.consumer:app"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        with conveyor.connect(f"sqlite://{tmp_path / '.conveyor'}") as cv:
            deadline = time.monotonic() + 30
            while not _settled(cv) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert _settled(cv), "the worker did not handle the orders within 30 s"
            (dead,) = cv.queue("orders-dlq").peek()
            assert dead.body == {"order": 7, "amount": 70}
    finally:
        worker.send_signal(signal.SIGINT)
        output, _ = worker.communicate(timeout=30)
    assert worker.returncode == 0, output
    handled = [line for line in output.splitlines() if line.startswith("handled order")]
    assert len(handled) == 9 and "handled order 7" not in output
    assert "order 7 failed (delivery 3)" in output


def _settled(cv: conveyor.Conveyor) -> bool:
    try:
        dlq = cv.queue("orders-dlq")
    except conveyor.QueueNotFound:
        return False
    return cv.queue("orders").metrics().backlog_count == 0 and dlq.metrics().backlog_count == 1
