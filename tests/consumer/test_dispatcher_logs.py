"""What the dispatcher says about a failed batch."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import conveyor


def test_failed_batch_log_counts_only_the_messages_it_retries(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with conveyor.connect(f"sqlite://{tmp_path / 'data'}") as cv:
        q = cv.create_queue("half")
        q.send_batch([{"body": i} for i in range(10)])
        app = conveyor.App(cv)
        failed_once: list[bool] = []

        @app.consumer("half", max_batch_size=10, max_batch_timeout=1.0)
        def handle(batch: conveyor.MessageBatch) -> None:
            if failed_once:
                return
            failed_once.append(True)
            for m in batch.messages[:5]:
                m.ack()
            raise RuntimeError("half done")

        with caplog.at_level(logging.ERROR, logger="conveyor.consumer"):
            assert app.drain(timeout=20)
    [line] = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert "retrying 5 of the batch's 10 messages (5 acked before it failed)" in line
