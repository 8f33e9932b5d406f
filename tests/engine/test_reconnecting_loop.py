"""The reconnecting loop run on a real thread: a step that fails with a transient error is tried
again after a jittered backoff, the failure is logged once and its end once, a stop ends the loop
at once, and an error it was not told is transient ends it."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from conveyor.engine.reconnecting_loop import Backoff, ReconnectingLoop

log = logging.getLogger("conveyor.test.loop")
QUICK = Backoff(0.02, 0.08)


class FlakyStep:
    """Fails ``failures`` times with ``ConnectionError``, then succeeds; records when it ran."""

    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures = failures
        self.error = error or ConnectionError("server closed the connection")
        self.runs: list[float] = []
        self.succeeded = threading.Event()

    def __call__(self) -> float:
        self.runs.append(time.monotonic())
        if len(self.runs) <= self.failures:
            raise self.error
        self.succeeded.set()
        return 0.01


def run_in_thread(loop: ReconnectingLoop) -> tuple[threading.Thread, list[BaseException]]:
    raised: list[BaseException] = []

    def target() -> None:
        try:
            loop.run()
        except BaseException as exc:  # the test's own boundary: handed to the asserting thread
            raised.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    return thread, raised


def test_a_step_that_fails_then_succeeds_is_retried_with_backoff_and_logged_once_each_way(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=log.name)
    stop = threading.Event()
    step = FlakyStep(failures=4)
    dropped: list[Exception] = []
    loop = ReconnectingLoop(
        "listening", step, stop=stop, transient=(ConnectionError,), log=log, backoff=QUICK, on_error=dropped.append
    )
    thread, raised = run_in_thread(loop)
    assert step.succeeded.wait(5)
    stop.set()
    thread.join(5)

    assert not thread.is_alive() and raised == []
    assert len(dropped) == 4
    pauses = [b - a for a, b in zip(step.runs, step.runs[1:5], strict=False)]
    # Doubling from 0.02 s up to 0.08 s, each between half and all of it.
    for pause, ceiling in zip(pauses, [0.02, 0.04, 0.08, 0.08], strict=True):
        assert ceiling / 2 <= pause < ceiling + 0.05
    assert [r.getMessage() for r in caplog.records] == [
        "listening failed (server closed the connection); trying again (reported again when this changes)",
        "listening works again after 4 failed attempts",
    ]


def test_a_changed_error_is_reported_again(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=log.name)
    stop = threading.Event()
    errors = iter([ConnectionError("refused"), ConnectionError("refused"), ConnectionError("reset")])

    def step() -> None:
        error = next(errors, None)
        if error is None:
            stop.set()
            return
        raise error

    loop = ReconnectingLoop("sending", step, stop=stop, transient=(ConnectionError,), log=log, backoff=QUICK)
    thread, raised = run_in_thread(loop)
    thread.join(5)
    assert raised == []
    assert [r.getMessage().split(";")[0] for r in caplog.records] == [
        "sending failed (refused)",
        "sending failed (reset)",
        "sending works again after 3 failed attempts",
    ]


def test_stop_ends_the_loop_during_a_backoff_pause() -> None:
    stop = threading.Event()
    step = FlakyStep(failures=1_000)
    loop = ReconnectingLoop(
        "vacuuming", step, stop=stop, transient=(ConnectionError,), log=log, backoff=Backoff(30, 30)
    )
    thread, raised = run_in_thread(loop)
    deadline = time.monotonic() + 5
    while not step.runs and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    stop.set()
    thread.join(5)
    assert not thread.is_alive() and raised == []
    assert time.monotonic() - started < 1 and len(step.runs) == 1


def test_an_error_not_named_transient_ends_the_loop_and_is_raised() -> None:
    stop = threading.Event()
    step = FlakyStep(failures=1, error=ValueError("a bug"))
    loop = ReconnectingLoop("listening", step, stop=stop, transient=(ConnectionError,), log=log, backoff=QUICK)
    thread, raised = run_in_thread(loop)
    thread.join(5)
    assert not thread.is_alive()
    assert [str(exc) for exc in raised] == ["a bug"] and len(step.runs) == 1


def test_the_first_step_waits_for_start_after() -> None:
    stop = threading.Event()
    step = FlakyStep(failures=0)
    loop = ReconnectingLoop(
        "vacuuming", step, stop=stop, transient=(ConnectionError,), log=log, backoff=QUICK, start_after=0.2
    )
    started = time.monotonic()
    thread, _ = run_in_thread(loop)
    assert step.succeeded.wait(5)
    stop.set()
    thread.join(5)
    assert step.runs[0] - started >= 0.2
