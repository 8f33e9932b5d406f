"""On SQLite the workflow store's reads (status, lists, the coordinator's rounds) run on a read
connection of their own, beside the writers: a dashboard or a client polling statuses takes no write
lock and waits for no writer, of this process or another."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import conveyor
from tests.workflows.support import running, settled


def test_a_status_read_does_not_wait_for_another_process_holding_the_write_lock(tmp_path: Path) -> None:
    cv = conveyor.connect(f"sqlite://{tmp_path / 'data'}")
    app = conveyor.App(cv, grace_period=5)

    @app.workflow("quick")
    def quick(event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> int:
        return int(step.do("one", lambda: 1))

    try:
        with running(app):
            inst = cv.workflow("quick").create(id="q1")
            settled(inst, "complete")
        # Another process (a raw connection stands for it) holds workflows.db's write lock.
        other = sqlite3.connect(tmp_path / "data" / "workflows.db", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        seen: list[str] = []
        try:
            reader = threading.Thread(target=lambda: seen.append(inst.status().status), daemon=True)
            reader.start()
            reader.join(5)  # a read through the write lock would wait for it (up to a minute)
            assert seen == ["complete"]
            assert [i.id for i in cv.workflow("quick").list_instances().instances] == ["q1"]
        finally:
            other.execute("ROLLBACK")
            other.close()
    finally:
        cv.close()
