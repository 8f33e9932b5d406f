"""The worker registry on every engine: a running App records itself with what it runs, renews its
heartbeat, leaves on stop, and an entry whose heartbeat stopped is pruned."""

from __future__ import annotations

import time

import conveyor
from conveyor.model import WorkerEntry, WorkerRun
from tests.conformance.support import FakeClock


def test_a_running_app_is_listed_with_what_it_runs_and_leaves_when_it_stops(
    conveyor_client: conveyor.Conveyor,
) -> None:
    q = conveyor_client.create_queue("registry")
    app = conveyor.App(conveyor_client)

    @app.consumer("registry", max_concurrency=7)
    def handle(batch: conveyor.MessageBatch) -> None:
        pass

    app.start()
    try:
        [entry] = conveyor_client.engine.list_workers()
        script = f"{handle.__module__}:{handle.__qualname__}"
        runs = [(r.queue_id, r.queue_name, r.script_name, r.max_concurrency) for r in entry.runs]
        assert runs == [(q.id, "registry", script, 7)]
        assert entry.started_ms <= entry.heartbeat_ms
    finally:
        app.stop()
    assert conveyor_client.engine.list_workers() == []


def test_an_entry_whose_heartbeat_stopped_is_pruned(conveyor_client: conveyor.Conveyor, clock: FakeClock) -> None:
    q = conveyor_client.create_queue("pruned")
    engine = conveyor_client.engine
    run = WorkerRun(q.id, "pruned", "jobs:handle", None, 2)
    engine.record_worker(WorkerEntry("a" * 32, "host-a", 11, clock.now_ms(), 0, (run,)))
    clock.advance(20)
    engine.record_worker(WorkerEntry("b" * 32, "host-b", 12, clock.now_ms(), 0, (run,)))
    assert [w.worker_id for w in engine.list_workers()] == ["a" * 32, "b" * 32]
    clock.advance(15)  # a: 35 s without a heartbeat, b: 15 s
    [alive] = engine.list_workers()
    assert (alive.worker_id, alive.host, alive.pid, alive.heartbeat_ms) == (
        "b" * 32,
        "host-b",
        12,
        clock.now_ms() - 15_000,
    )
    assert alive.runs[0].concurrency == 2


def test_heartbeats_renew_an_entry_with_its_current_runs(conveyor_client: conveyor.Conveyor) -> None:
    q = conveyor_client.create_queue("beats")
    engine = conveyor_client.engine
    entry = WorkerEntry("c" * 32, "host-c", 13, engine.clock.now_ms(), 0, (WorkerRun(q.id, "beats", "x:y", None, 0),))
    engine.record_worker(entry)
    first = engine.list_workers()[0].heartbeat_ms
    time.sleep(0.01)
    busy = (WorkerRun(q.id, "beats", "x:y", None, 5),)
    engine.record_worker(WorkerEntry("c" * 32, "host-c", 13, entry.started_ms, 0, busy))
    [renewed] = engine.list_workers()
    assert renewed.heartbeat_ms >= first and renewed.runs[0].concurrency == 5
    engine.remove_worker("c" * 32)
    assert engine.list_workers() == []
