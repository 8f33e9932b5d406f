"""The internal queues of workflows stay out of every account listing, the server's REST list too."""

from __future__ import annotations

from pathlib import Path

import conveyor
from conveyor.server.testing import http_client


def test_the_rest_queue_list_leaves_workflow_queues_out(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with conveyor.connect(f"sqlite://{data}") as cv:
        cv.create_queue("mine")
        app = conveyor.App(cv)
        app.workflow("hidden")(lambda event, step: None)
        app.start()
        app.stop(grace=1)
        assert [q.queue_name for q in cv.list_queues()] == ["mine"]
        assert any("~" in q.queue_name for q in cv.engine.inner.list_queues())  # it does exist
    remote = http_client(data, account_id="local")
    try:
        assert [q.queue_name for q in remote.list_queues()] == ["mine"]
    finally:
        remote.close()
