"""Helpers of the workflow suite: a running app, the hand-driven clock, waiting for statuses."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import conveyor
from conveyor.engine.accounts import AccountEngine
from conveyor.server.testing import InProcessRemoteEngine
from conveyor.workflows.client import workflow_store
from tests.conformance.support import FakeClock
from tests.waiting import wait_for


@contextlib.contextmanager
def running(app: conveyor.App) -> Iterator[conveyor.App]:
    """``app`` started (its workflows registered and consumed) until the block ends."""
    app.start()
    try:
        yield app
    finally:
        app.stop(grace=5)


def internal_queue(cv: conveyor.Conveyor, workflow: str) -> str:
    """The id of ``workflow``'s internal queue, made if missing (by the server, for a remote client)."""
    return workflow_store(cv).internal_queue(cv.deployment.account, workflow, cv.engine)


def deployment_side(cv: conveyor.Conveyor) -> conveyor.Conveyor:
    """``cv`` itself on an embedded engine; for a remote client, the server's own view of the same
    account (its engine, its store): what only the deployment does (retention, the rescuer, the
    store's maintenance) is reached there, as the server's coordinator reaches it. Never close it:
    the server's engine is the server's."""
    engine = cv.engine
    if isinstance(engine, InProcessRemoteEngine):
        return conveyor.Conveyor(AccountEngine(engine.server_engine, cv.deployment.account, owns_engine=True))
    return cv


def advance(app: conveyor.App, clock: FakeClock, seconds: float) -> None:
    """Move the clock on and wake the app's dispatchers, so delayed wake-ups are leased at once."""
    clock.advance(seconds)
    for dispatcher in app.dispatchers.values():
        app.conveyor.engine.wake(dispatcher.queue_id)


def settled(inst: Any, *statuses: str, timeout: float = 15.0) -> conveyor.InstanceStatus:
    """Wait until the instance's status is one of ``statuses``; returns its status."""
    seen: list[conveyor.InstanceStatus] = []

    def reached() -> bool:
        seen[:] = [inst.status()]
        return seen[0].status in statuses

    wait_for(reached, timeout=timeout, what=f"instance {inst.id} to be {' or '.join(statuses)}")
    return seen[0]


class Ledger:
    """Counts calls of step functions by name (what ran, how often)."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    def __call__(self, name: str, value: Any = None) -> Callable[[], Any]:
        def fn() -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return value if value is not None else name

        return fn
