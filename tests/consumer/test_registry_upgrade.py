"""A deployment directory made before the worker registry gets its table in place on open."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import conveyor
from conveyor.client.connect import open_engine
from conveyor.model import WorkerEntry


def test_a_catalog_without_the_workers_table_gets_it_and_keeps_its_queues(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with conveyor.connect(f"sqlite://{data}") as cv:
        cv.create_queue("kept").send("still here", content_type="text")
    with sqlite3.connect(data / "catalog.db") as conn:  # as a directory of an older Conveyor has it
        conn.execute("DROP TABLE workers")
    # The deployment's own view: an account sees only workers that run its queues.
    with contextlib.closing(open_engine(f"sqlite://{data}")) as engine:
        assert engine.list_workers() == []
        engine.record_worker(WorkerEntry("f" * 32, "host", 1, engine.clock.now_ms(), 0))
        assert [w.worker_id for w in engine.list_workers()] == ["f" * 32]
    with conveyor.connect(f"sqlite://{data}") as cv:
        assert [m.body for m in cv.queue("kept").peek(1)] == ["still here"]
