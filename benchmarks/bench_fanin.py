"""Fan-in: how soon a parent that waits for 1,000 children wakes after the last one ends, against
the queue's idle send → handler latency, on SQLite and on PostgreSQL, in the same run.

The workload is docs/workflows.md's recipe: the parent counts its children on a ``conveyor.Counter``,
registers ``notify_at_zero`` and creates them; each child's last step counts down; the parent sleeps
in ``step.wait_for_event``. One app runs both workflows (as a worker would), so every moment is
stamped with ``time.time()`` in this one process:

- *zero committed*: the workflow store's transaction of the count-down that reached zero returned
  (the bench times the store's ``counter_add``): the last child has finished its work, and the
  counter's event is written;
- *last child's finish*: the store's ``finish`` of the last of the parent's children to end
  returned (the child's count-down step and its end stored after the zero);
- *count-down began*: that child's step called ``add(-1)`` (before it waited for the counter's row,
  which every child's count-down takes in turn);
- *woke*: the parent's function went on past its ``wait_for_event``.

Both wake latencies are judged against the same ceiling, median wake latency ≤ 3 × the median
idle latency: after the last child's finish (issue 12 names it: "wakes within 3 × ... of the last
child's finish"; negative when the parent woke before that end was stored), and after the zero's
commit (the stricter one, which earlier stops judged: the whole event → wake-up message → lease
→ claim → take path comes after it). Woke − count-down began is printed too.
The baseline is the idle queue's send → handler-start latency on the same deployment (one
``Conveyor`` shared by producer and worker, as ``App(cv)``), measured just before.

Usage: ``.venv/bin/python benchmarks/bench_fanin.py [--quick] [--engine sqlite|postgres]`` (both
engines unless one is given); one JSON line per measurement.
PostgreSQL is ``$CONVEYOR_BENCH_PG`` (default ``postgresql://127.0.0.1:5432/test``), in a scratch schema.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import conveyor
from bench_postgres import scratch_schema
from conveyor.workflows.client import workflow_store
from harness import body, emit, quiet_logs, scratch_directory

GAP_SECONDS = 0.03
TARGET = 3.0


class Stamps:
    """What the workflows stamp: the start of the count-down that reached zero, the parent's wake."""

    def __init__(self) -> None:
        self.began: dict[str, float] = {}  # the count-down that reached zero: its call
        self.zeroed: dict[str, float] = {}  # ... and its store transaction's return
        self.woke: dict[str, float] = {}
        self.finished: dict[str, float] = {}  # the last of its children's ends: its store transaction's return
        self._cond = threading.Condition()
        self._local = threading.local()

    def timed_store(self, cv: conveyor.Conveyor) -> None:
        """Time the store's ``counter_add`` and the children's ``finish`` (the bench's own
        measuring, nothing else changes)."""
        store = workflow_store(cv)
        add, finish = store.counter_add, store.finish

        def counter_add(*args: Any, **kwargs: Any) -> Any:
            change = add(*args, **kwargs)
            self._local.committed = time.time()
            return change

        def timed_finish(account: str, workflow: str, instance_id: str, *args: Any, **kwargs: Any) -> Any:
            done = finish(account, workflow, instance_id, *args, **kwargs)
            if workflow == "child":  # ids are PARENT-N
                parent, ended = instance_id.rpartition("-")[0], time.time()
                with self._cond:
                    self.finished[parent] = max(self.finished.get(parent, ended), ended)
            return done

        store.counter_add = counter_add  # type: ignore[method-assign]
        store.finish = timed_finish  # type: ignore[method-assign]

    def count_down(self, counter: conveyor.Counter, key: str, parent: str) -> int:
        started = time.time()
        value = counter.add(-1, key=key)
        if value == 0:
            with self._cond:
                self.began.setdefault(parent, started)
                self.zeroed.setdefault(parent, self._local.committed)
                self._cond.notify_all()
        return value

    def wake(self, parent: str) -> None:
        with self._cond:
            self.woke.setdefault(parent, time.time())
            self._cond.notify_all()

    def wait(self, parent: str, timeout: float) -> None:
        with self._cond:
            # The parent may wake before the last child's add() has returned to it.
            if not self._cond.wait_for(lambda: parent in self.woke and parent in self.zeroed, timeout):
                raise RuntimeError(f"parent {parent} did not wake within {timeout:g} s")


def fan_in_app(cv: conveyor.Conveyor, stamps: Stamps) -> conveyor.App:
    app = conveyor.App(cv)

    @app.workflow("parent")
    def parent(event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> int:
        children = event.payload["children"]
        name = f"fanin:{event.instance_id}"

        def fan_out() -> int:
            done = cv.counter(name)
            done.add(children, key="fan-out")
            done.notify_at_zero("parent", event.instance_id, "children-done")
            items = [
                {"id": f"{event.instance_id}-{i}", "params": {"parent": event.instance_id}} for i in range(children)
            ]
            for start in range(0, children, 100):
                cv.workflow("child").create_batch(items[start : start + 100])
            return children

        count = int(step.do("fan out", fan_out))
        step.wait_for_event("children", type="children-done", timeout="1 hour")
        stamps.wake(event.instance_id)
        step.do("clean up", lambda: cv.counter(name).delete())
        return count

    @app.workflow("child")
    def child(event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> int:
        parent_id = event.payload["parent"]
        size = int(step.do("work", lambda: len(event.instance_id)))
        counter = cv.counter(f"fanin:{parent_id}")
        step.do("count down", lambda: stamps.count_down(counter, event.instance_id, parent_id))
        return size

    return app


def idle_latency(cv: conveyor.Conveyor, count: int) -> list[float]:
    """Send → handler-start on an idle queue of this deployment, in seconds."""
    q = cv.create_queue("idle-latency")
    arrived: list[float] = []
    cond = threading.Condition()

    def handle(batch: conveyor.MessageBatch) -> None:
        now = time.time()
        with cond:
            arrived.extend(now - m.body["sent"] for m in batch.messages)
            cond.notify_all()

    app = conveyor.App(cv)
    app.consumer("idle-latency", max_batch_size=1, max_batch_timeout=0)(handle)
    app.start()
    try:
        for i in range(count):
            time.sleep(GAP_SECONDS)
            q.send(body(i))
            with cond:
                if not cond.wait_for(lambda n=i + 1: len(arrived) >= n, 30):
                    raise RuntimeError("an idle send was not handled within 30 s")
    finally:
        app.stop()
    return arrived


def fan_in(cv: conveyor.Conveyor, rounds: int, children: int) -> dict[str, list[float]]:
    """Per round of a parent with ``children`` (s): the wake latency after the zero's commit
    (``wakes``), after the last child's end (``after_finish``; negative when the parent woke
    before that end was stored) and after the last count-down began (``from_began``), and the
    makespan."""
    stamps = Stamps()
    stamps.timed_store(cv)
    app = fan_in_app(cv, stamps)
    app.start()
    found: dict[str, list[float]] = {"wakes": [], "after_finish": [], "from_began": [], "makespans": []}
    try:
        for r in range(rounds):
            parent = f"p{r}"
            started = time.time()
            cv.workflow("parent").create({"children": children}, id=parent)
            stamps.wait(parent, timeout=600)
            time.sleep(0.5)  # the children's last writes settle; the next round starts idle
            woke = stamps.woke[parent]
            found["wakes"].append(woke - stamps.zeroed[parent])
            found["after_finish"].append(woke - stamps.finished[parent])
            found["from_began"].append(woke - stamps.began[parent])
            found["makespans"].append(woke - started)
    finally:
        app.stop()
    return found


def measure(engine: str, connect: Callable[[], conveyor.Conveyor], rounds: int, children: int, sends: int) -> None:
    with connect() as cv:
        idle = statistics.median(idle_latency(cv, sends)) * 1000
        found = fan_in(cv, rounds, children)
    params: dict[str, Any] = {"engine": engine, "children": children}
    emit("fanin_idle_send_to_handler_p50", idle, "ms", sends, **params)
    medians = {}
    for key, name in (
        ("wakes", "fanin_wake_after_zero_p50"),
        ("after_finish", "fanin_wake_after_last_child_finish_p50"),
        ("from_began", "fanin_wake_after_last_count_down_began_p50"),
    ):
        medians[key] = statistics.median(found[key]) * 1000
        emit(name, medians[key], "ms", rounds, **params, all_ms=[round(w * 1000, 2) for w in found[key]])
    emit("fanin_round_makespan_p50", statistics.median(found["makespans"]), "s", rounds, **params)
    # The target is a ceiling: wake / idle <= 3 ("met" when it is), from the last child's finish
    # (the reference) and, stricter, from the zero's commit, which comes before that
    # child's step and end are stored.
    for key, name in (
        ("after_finish", "fanin_wake_after_finish_over_idle_latency"),
        ("wakes", "fanin_wake_over_idle_latency"),
    ):
        value = medians[key] / idle if idle else float("inf")
        emit(name, value, "ratio", rounds, **params, target_max=TARGET, met=value <= TARGET)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 100 children, 2 rounds")
    parser.add_argument("--engine", choices=["sqlite", "postgres"], help="only this engine (default: both)")
    args = parser.parse_args()
    quiet_logs()
    rounds, children, sends = (2, 100, 20) if args.quick else (5, 1000, 100)
    if args.engine in (None, "sqlite"):
        with scratch_directory("fanin") as directory:
            measure("sqlite", lambda: conveyor.connect(f"sqlite://{directory / 'data'}"), rounds, children, sends)
    if args.engine in (None, "postgres"):
        with scratch_schema("fanin") as url:
            measure("postgres", lambda: conveyor.connect(url), rounds, children, sends)


if __name__ == "__main__":
    main()
