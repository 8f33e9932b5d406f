"""A process SIGKILLed between an object's metadata commit and the sending of its notification:
the coordinator's outbox sweep still delivers the notification."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import conveyor
from conveyor.storage.service import FAULT_VARIABLE
from tests.engine.postgres.support import fresh_client
from tests.storage.conftest import make_bucket
from tests.waiting import wait_for

CRASH_PUT = Path(__file__).with_name("crash_put.py")


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_notification_survives_a_sigkill_after_the_commit(engine: str, tmp_path: Path) -> None:
    if engine == "sqlite":
        url = f"sqlite://{tmp_path / 'data'}"
        cv = conveyor.connect(url)
    else:
        os.environ.pop("CONVEYOR_SHARED_BUCKET_DIRECTORIES", None)
        throwaway = fresh_client(tmp_path)  # a schema of its own, dropped when the tests end
        url = throwaway.url
        throwaway.close()
        cv = conveyor.connect(url)  # account "local", as the crashing process's
    env = dict(os.environ, **{FAULT_VARIABLE: "after-commit"})
    if engine == "postgres":
        env["CONVEYOR_SHARED_BUCKET_DIRECTORIES"] = str(tmp_path / "shared")
        os.environ["CONVEYOR_SHARED_BUCKET_DIRECTORIES"] = str(tmp_path / "shared")
    try:
        cv.create_queue("written")
        bucket = make_bucket(cv, "local", "cdn", tmp_path, None)
        bucket.add_notification("written", actions=["PutObject"])

        crashed = subprocess.run(
            [sys.executable, str(CRASH_PUT), url, "cdn", "crash/key.txt"], env=env, capture_output=True, timeout=60
        )
        assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
        assert bucket.head("crash/key.txt").size == len(b"written before the crash")
        assert cv.queue("written").metrics().backlog_count == 0  # killed before the send

        seen: list[dict[str, object]] = []
        app = conveyor.App(cv)

        @app.consumer("written", max_batch_timeout=0.05)
        def handle(batch: conveyor.MessageBatch) -> None:
            for m in batch.messages:
                seen.append(m.body)
                m.ack()

        app.start()
        try:
            wait_for(lambda: seen, timeout=30, what="the swept notification")
        finally:
            app.stop()
        assert [(m["action"], m["object"]["key"]) for m in seen] == [("PutObject", "crash/key.txt")]  # type: ignore[index]
    finally:
        os.environ.pop("CONVEYOR_SHARED_BUCKET_DIRECTORIES", None)
        cv.close()
