"""Fan-in: how soon a parent that waits for 1,000 children wakes after the last one ends, against
the queue's idle send → handler latency, on SQLite and on PostgreSQL, in the same run.

The workload is docs/workflows.md's recipe: the parent counts its children on a ``conveyor.Counter``,
registers ``notify_at_zero`` and creates them; each child's last step counts down; the parent sleeps
in ``step.wait_for_event``. One app runs both workflows (as a worker would), so every moment is
stamped with ``time.time()`` in this one process:

- *zero committed*: the workflow store's transaction of the count-down that reached zero returned
  (the bench times the store's ``counter_add``): the last child has finished its work, and the
  counter's event is written;
- *count-down began*: that child's step called ``add(-1)`` (before it waited for the counter's row,
  which every child's count-down takes in turn);
- *woke*: the parent's function went on past its ``wait_for_event``.

The wake latency is woke − zero committed (the event → wake-up message → lease → claim → take
path); woke − count-down began is printed too. The baseline is the idle queue's send →
handler-start latency on the same deployment (one ``Conveyor`` shared by producer and worker, as
``App(cv)``), measured just before. Target: median wake latency ≤ 3 × the median idle latency.

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
        self._cond = threading.Condition()
        self._local = threading.local()

    def timed_store(self, cv: conveyor.Conveyor) -> None:
        """Time the store's ``counter_add`` (the bench's own measuring, nothing else changes)."""
        store = workflow_store(cv)
        add = store.counter_add

        def counter_add(*args: Any, **kwargs: Any) -> Any:
            change = add(*args, **kwargs)
            self._local.committed = time.time()
            return change

        store.counter_add = counter_add  # type: ignore[method-assign]

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


def fan_in(cv: conveyor.Conveyor, rounds: int, children: int) -> tuple[list[float], list[float], list[float]]:
    """Per round of a parent with ``children``: the wake latency after the zero's commit and after
    the last count-down began, and the makespan (s)."""
    stamps = Stamps()
    stamps.timed_store(cv)
    app = fan_in_app(cv, stamps)
    app.start()
    wakes, from_began, makespans = [], [], []
    try:
        for r in range(rounds):
            started = time.time()
            cv.workflow("parent").create({"children": children}, id=f"p{r}")
            stamps.wait(f"p{r}", timeout=600)
            wakes.append(stamps.woke[f"p{r}"] - stamps.zeroed[f"p{r}"])
            from_began.append(stamps.woke[f"p{r}"] - stamps.began[f"p{r}"])
            makespans.append(stamps.woke[f"p{r}"] - started)
            time.sleep(0.5)  # the children's last writes settle; the next round starts idle
    finally:
        app.stop()
    return wakes, from_began, makespans


def measure(engine: str, connect: Callable[[], conveyor.Conveyor], rounds: int, children: int, sends: int) -> None:
    with connect() as cv:
        idle = statistics.median(idle_latency(cv, sends)) * 1000
        wakes, from_began, makespans = fan_in(cv, rounds, children)
    wake = statistics.median(wakes) * 1000
    params: dict[str, Any] = {"engine": engine, "children": children}
    emit("fanin_idle_send_to_handler_p50", idle, "ms", sends, **params)
    emit("fanin_wake_after_zero_p50", wake, "ms", rounds, **params, all_ms=[round(w * 1000, 2) for w in wakes])
    emit(
        "fanin_wake_after_last_count_down_began_p50",
        statistics.median(from_began) * 1000,
        "ms",
        rounds,
        **params,
        all_ms=[round(w * 1000, 2) for w in from_began],
    )
    emit("fanin_round_makespan_p50", statistics.median(makespans), "s", rounds, **params)
    # The target is a ceiling: wake / idle ≤ 3 ("met" when it is).
    ratio_value = wake / idle if idle else float("inf")
    emit(
        "fanin_wake_over_idle_latency",
        ratio_value,
        "ratio",
        rounds,
        **params,
        target_max=TARGET,
        met=ratio_value <= TARGET,
    )


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
