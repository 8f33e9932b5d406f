"""Several workers (each its own client of the deployment) share a workflow's instances: every
instance completes, and no step runs twice."""

from __future__ import annotations

import collections
import threading
from pathlib import Path

import conveyor
from tests.waiting import wait_for
from tests.workflows.conftest import ENGINES

INSTANCES = 30


def test_two_workers_run_each_step_exactly_once(cv, tmp_path: Path, request) -> None:
    engine = request.node.callspec.params["cv"]
    lock = threading.Lock()
    runs: collections.Counter[tuple[str, str]] = collections.Counter()

    def define(app: conveyor.App) -> None:
        @app.workflow("shared", concurrency=4)
        def run(event, step):
            out = []
            for name in ("a", "b", "c"):

                def body(name: str = name) -> str:
                    with lock:
                        runs[(event.instance_id, name)] += 1
                    return name

                out.append(step.do(name, body))
                if name == "a":
                    step.sleep("yield", 0)
            return out

    other = ENGINES[engine](tmp_path)
    apps = [conveyor.App(cv, grace_period=5), conveyor.App(other, grace_period=5)]
    for app in apps:
        define(app)
    try:
        for app in apps:
            app.start()
        wf = cv.workflow("shared")
        wf.create_batch([{"id": f"i{n}", "params": n} for n in range(INSTANCES)])

        def all_complete() -> bool:
            page = wf.list_instances(status="complete", per_page=100)
            return len(page.instances) == INSTANCES

        wait_for(all_complete, timeout=60, what="every instance to complete")
    finally:
        for app in apps:
            app.stop(grace=5)
        other.close()
    assert set(runs.values()) == {1}, {k: v for k, v in runs.items() if v != 1}
    assert len(runs) == 3 * INSTANCES
