"""The autoscaler's fit to what more batches at once bring, on a clock the test drives.

A workload here is a rate of finished batches for each number running at once, and whether the
process computes while they run (its CPU clock advancing at one core) or waits (a tenth of one).
The driver keeps as many batches running as the autoscaler allows, the way the dispatcher does
with a backlog, and finishes one every 1 / rate seconds.
"""

from __future__ import annotations

from collections.abc import Callable

from conveyor.consumer import autoscaler
from conveyor.consumer.autoscaler import Autoscaler

Rate = Callable[[int], float]


def computing(running: int) -> float:
    """Python work: more than 4 at once finish no more (they take turns on the interpreter lock)."""
    return 100.0 * min(running, 4)


def waiting(running: int) -> float:
    """Handlers waiting on a service: each one more at once finishes as many more."""
    return 10.0 * running


class Workload:
    def __init__(self, cap: int | None = 32) -> None:
        self.now = 0.0
        self.cpu = 0.0
        self.scaler = Autoscaler("q", cap, cpu_seconds=lambda: self.cpu, clock=lambda: self.now)

    def advance(self, seconds: float, cores: float) -> None:
        self.now += seconds
        self.cpu += seconds * cores

    def run(self, batches: int, rate: Rate, cores: float, *, failing: bool = False) -> list[int]:
        """Finish ``batches`` batches; the allowed concurrency after each."""
        allowed = []
        for _ in range(batches):
            while self.scaler.has_room():
                self.scaler.started()
            self.advance(1 / rate(self.scaler.running), cores)
            self.scaler.finished(failed=failing)
            allowed.append(self.scaler.allowed)
        return allowed


def test_computing_handlers_run_as_few_at_once_as_finish_as_many() -> None:
    work = Workload(cap=32)
    work.run(2_000, computing, cores=1.0)
    # 32, 16, 8 and 4 at once finish 400 a second; 2 finish 200: the fit stays at 4.
    assert work.scaler.allowed == 4
    assert work.scaler.peak == 32  # the backlog was still met at once


def test_waiting_handlers_keep_the_cap_even_when_the_process_is_busy() -> None:
    work = Workload(cap=32)
    allowed = work.run(2_000, waiting, cores=1.0)
    # Half as many at once finished half as many: back to 32 after the one trial.
    assert allowed[-1] == 32
    assert min(allowed) == 16


def test_an_idle_process_is_never_fitted() -> None:
    work = Workload(cap=None)
    allowed = work.run(3_000, computing, cores=0.1)
    assert set(allowed) == {250}


def test_a_fit_grows_back_once_the_handlers_wait_instead() -> None:
    work = Workload(cap=32)
    work.run(1_000, computing, cores=1.0)
    assert work.scaler.allowed == 4
    work.run(2_000, waiting, cores=0.1)
    assert work.scaler.allowed == 32


def test_a_fit_tries_more_at_once_again_after_a_while() -> None:
    work = Workload(cap=32)
    work.run(1_000, computing, cores=1.0)
    assert work.scaler.allowed == 4
    # Still computing, but now more at once would pay: the next trial finds it.
    work.run(int(autoscaler.PROBE_SECONDS * 400) + 4_000, lambda n: 100.0 * min(n, 32), cores=1.0)
    assert work.scaler.allowed == 32


def test_a_window_where_the_limit_does_not_bind_changes_nothing() -> None:
    work = Workload(cap=32)
    for _ in range(400):  # one batch at a time, busy: far below the 32 allowed
        work.scaler.started()
        work.advance(0.01, 1.0)
        work.scaler.finished(failed=False)
    assert work.scaler.allowed == 32


def test_failures_back_off_below_the_fit_and_recover_up_to_it() -> None:
    work = Workload(cap=32)
    work.run(1_000, computing, cores=1.0)
    assert work.scaler.allowed == 4
    assert work.run(2, computing, cores=1.0, failing=True) == [2, 1]
    assert work.run(3, computing, cores=1.0)[-1] == 4  # doubled back to the fit, not the cap


def test_a_slot_held_by_a_slow_handler_does_not_stall_the_fit() -> None:
    work = Workload(cap=8)
    work.run(1_000, computing, cores=1.0)
    fitted = work.scaler.allowed
    assert fitted == 4
    # Every slot is now held by a handler waiting on something slow: no batch finishes, the process
    # idles; the dispatcher's look for room closes the window on time and tries more at once.
    while work.scaler.has_room():
        work.scaler.started()
    for _ in range(10):
        work.advance(autoscaler.WINDOW_SECONDS, 0.0)
        work.scaler.has_room()
    assert work.scaler.allowed == 8


def test_no_cpu_clock_means_no_fit() -> None:
    scaler = Autoscaler("q", 32, cpu_seconds=None)
    for _ in range(500):
        while scaler.has_room():
            scaler.started()
        scaler.finished(failed=False)
    assert scaler.allowed == 32


def test_a_cap_that_is_no_power_of_two_is_never_passed() -> None:
    work = Workload(cap=5)
    allowed = work.run(1_000, computing, cores=1.0)
    allowed += work.run(int(autoscaler.PROBE_SECONDS * 400) + 2_000, waiting, cores=0.1)
    assert max(allowed) == 5
    assert allowed[-1] == 5
