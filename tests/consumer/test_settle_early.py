"""settle_early: a handler that gives up on a call it cannot stop frees its batch's place at once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import conveyor
from conveyor.consumer.batch import Message, MessageBatch, settle_early
from conveyor.model import Metrics
from tests.waiting import wait_for


@pytest.mark.parametrize("error", [None, RuntimeError("gave up")], ids=["acked", "retried"])
def test_a_batch_settled_early_frees_its_place_and_later_calls_change_nothing(
    tmp_path: Path, error: Exception | None
) -> None:
    release = threading.Event()
    seen: list[tuple[str, int]] = []
    with conveyor.connect(f"sqlite://{tmp_path / 'data'}") as cv:
        q = cv.create_queue("stuck")
        app = conveyor.App(cv)

        @app.consumer("stuck", max_batch_size=1, max_concurrency=1, retry_delay=0)
        def handle(batch: conveyor.MessageBatch) -> None:
            message = batch.messages[0]
            seen.append((message.body, message.attempts))
            if message.body == "first" and message.attempts == 1:
                settle_early(batch, error)
                release.wait(30)
                message.retry()  # too late: the batch was settled

        app.start()
        try:
            q.send("first")
            wait_for(lambda: seen, what="the first delivery")
            q.send("second")
            wait_for(lambda: ("second", 1) in seen, what="the second message, past the stuck thread")
            if error is not None:
                wait_for(lambda: ("first", 2) in seen, what="the first message again")
            assert not release.is_set()
        finally:
            release.set()
            app.stop(grace=5)
        assert q.metrics().backlog_count == 0
    assert sorted(seen) == sorted([("first", 1), ("second", 1)] + ([("first", 2)] if error else []))


def test_a_batch_not_delivered_by_a_dispatcher_cannot_be_settled_early() -> None:
    batch = MessageBatch("q", [Message("m", 0, b'"x"', 1, "json", "lease")], Metrics(0, 0, 0))
    with pytest.raises(RuntimeError, match="not delivered by a dispatcher"):
        settle_early(batch, None)
