"""``conveyor worker module:app`` as a real process: it handles messages, logs its concurrency, and
stops gracefully on SIGTERM, letting a running handler finish."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import conveyor
from tests.waiting import wait_for

from .support import CONVEYOR_BIN, Cli

APP_MODULE = textwrap.dedent(
    """
    import pathlib
    import time

    import conveyor

    HERE = pathlib.Path(__file__).parent
    app = conveyor.App()

    @app.consumer("jobs", max_batch_size=10, max_batch_timeout=0.05)
    def handle(batch):
        for m in batch.messages:
            if m.body == "slow":
                (HERE / "slow-started").touch()
                time.sleep(1.0)
                (HERE / "slow-finished").touch()
            else:
                with open(HERE / "handled.txt", "a") as out:
                    out.write(f"{m.body['n']}\\n")

    not_an_app = 42
    """
)


@contextmanager
def running_worker(tmp_path: Path, url: str, *args: str, account: str | None = None) -> Iterator[subprocess.Popen[str]]:
    """``conveyor worker jobsapp:app`` in ``tmp_path`` (as ``--account`` when given); killed on the
    way out if still running."""
    (tmp_path / "jobsapp.py").write_text(APP_MODULE)
    env = {k: v for k, v in os.environ.items() if k not in ("CONVEYOR_URL", "CONVEYOR_ACCOUNT_ID")}
    options = ["--url", url] + (["--account", account] if account else [])
    worker = subprocess.Popen(
        [str(CONVEYOR_BIN), *options, "worker", "jobsapp:app", "--grace-period", "10", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield worker
    finally:
        worker.kill()
        worker.wait()


def stop(worker: subprocess.Popen[str], signum: signal.Signals) -> str:
    """Signal the worker, wait for it to exit, and return its log (stderr)."""
    worker.send_signal(signum)
    return worker.communicate(timeout=30)[1]


def test_worker_handles_messages_and_stops_gracefully_on_sigterm(
    tmp_path: Path, url: str, client: conveyor.Conveyor
) -> None:
    jobs = client.create_queue("jobs")
    jobs.send_batch([{"body": {"n": n}} for n in range(50)])
    handled = tmp_path / "handled.txt"
    with running_worker(tmp_path, url) as worker:
        wait_for(
            lambda: handled.exists() and len(handled.read_text().split()) >= 50, timeout=30, what="50 messages handled"
        )
        jobs.send("slow")
        wait_for((tmp_path / "slow-started").exists, timeout=30, what="the slow handler to start")
        logs = stop(worker, signal.SIGTERM)
    assert worker.returncode == 0, logs
    assert sorted(int(n) for n in handled.read_text().split()) == list(range(50))
    assert (tmp_path / "slow-finished").exists(), "the running handler was not allowed to finish"
    assert jobs.metrics().backlog_count == 0, "the slow message was not acked before the worker stopped"
    consumer = jobs.consumer()
    assert consumer is not None and consumer.type == "worker" and consumer.script_name == "jobsapp:handle"
    assert "INFO" in logs and "consumer concurrency" in logs
    assert "received SIGTERM: stopping gracefully" in logs and "worker stopped" in logs
    assert "queue jobs: handled 51 messages, 0 failed batches" in logs


def test_worker_runs_in_the_account_the_global_option_names(tmp_path: Path, url: str) -> None:
    """``conveyor --account acme worker`` on an embedded URL consumes acme's queue, not local's."""
    with conveyor.connect(url, account_id="acme") as acme, conveyor.connect(url) as local:
        local.create_queue("jobs").send({"n": -1})
        acme.create_queue("jobs").send_batch([{"body": {"n": n}} for n in range(5)])
        handled = tmp_path / "handled.txt"
        with running_worker(tmp_path, url, account="acme") as worker:
            wait_for(
                lambda: handled.exists() and len(handled.read_text().split()) >= 5, timeout=30, what="acme's 5 messages"
            )
            logs = stop(worker, signal.SIGTERM)
        assert worker.returncode == 0, logs
        assert sorted(int(n) for n in handled.read_text().split()) == list(range(5))
        assert local.queue("jobs").metrics().backlog_count == 1 and local.queue("jobs").consumer() is None


def test_worker_json_logs_are_one_object_per_line(tmp_path: Path, url: str, client: conveyor.Conveyor) -> None:
    client.create_queue("jobs")
    with running_worker(tmp_path, url, "--json") as worker:
        wait_for(lambda: client.queue("jobs").consumer() is not None, timeout=30, what="the worker to register")
        logs = stop(worker, signal.SIGINT)
    assert worker.returncode == 0, logs
    entries = [json.loads(line) for line in logs.splitlines()]
    assert {"ts", "level", "logger", "message"} <= set(entries[0])
    assert any(e["message"] == "worker stopped" for e in entries)


def test_worker_target_that_is_not_an_app_is_a_usage_error(
    run: Cli, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "jobsapp.py").write_text(APP_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    # In-process, the command points $CONVEYOR_URL at --url and imports jobsapp: undo both afterwards.
    monkeypatch.setenv("CONVEYOR_URL", url)
    monkeypatch.setitem(sys.modules, "jobsapp", None)
    monkeypatch.delitem(sys.modules, "jobsapp")
    for target, message in (
        ("jobsapp", "not module:attribute"),
        ("no_such_module_xyz:app", "cannot import module"),
        ("jobsapp:missing", "has no attribute 'missing'"),
        ("jobsapp:not_an_app", "is of type int, not conveyor.App"),
    ):
        result = run("worker", target)
        assert result.exit_code == 2, result.output
        assert message in result.stderr


def test_worker_whose_queue_is_missing_fails_with_one_line(tmp_path: Path, url: str) -> None:
    with running_worker(tmp_path, url) as worker:
        logs = worker.communicate(timeout=30)[1]
    assert worker.returncode == 1
    assert logs.splitlines()[-1] == "error: queue 'jobs' does not exist (code 10104)"


def test_worker_refuses_a_queue_whose_consumer_is_another_script(
    tmp_path: Path, url: str, client: conveyor.Conveyor
) -> None:
    client.create_queue("jobs").add_consumer("worker", script_name="someone:else")
    with running_worker(tmp_path, url) as worker:
        logs = worker.communicate(timeout=30)[1]
    assert worker.returncode == 1
    last = logs.splitlines()[-1]
    assert last.startswith("error: queue 'jobs' already has a consumer") and last.endswith("(code 11004)")


def test_worker_app_whose_own_import_fails_shows_the_real_error(
    run: Cli, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "brokenapp.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("CONVEYOR_URL", url)
    with pytest.raises(ModuleNotFoundError) as raised:
        run("worker", "brokenapp:app")
    assert raised.value.name == "no_such_dependency_xyz"
