"""The ``conveyor`` model follows the consumer's code: scale to the backlog at once up to the cap,
one lease for as many batches as there is room for, a freed slot taken at once, batches by size and
timeout. (Against a real run: test_real_run.py.)"""

from __future__ import annotations

import pytest

from conveyor import limits
from conveyor.sim import ConveyorModel, simulate

FREE = ConveyorModel("no costs", 0.0, 0.0, 0.0)
COSTS = ConveyorModel("some costs", notice_seconds=0.01, lease_seconds=0.001, settle_seconds=0.002)


def test_automatic_concurrency_starts_the_whole_backlog_at_once() -> None:
    run = simulate(FREE, messages=9, hold=60.0)
    assert run.starts == (0.0,) * 9
    assert (run.peak, run.makespan) == (9, 60.0)


def test_one_dispatcher_step_after_the_send_is_noticed_starts_as_many_batches_as_there_is_room_for() -> None:
    run = simulate(COSTS, messages=40, hold=0.5)
    assert run.starts == pytest.approx([0.01 + 0.001] * 40)
    assert run.peak == 40
    assert run.makespan == pytest.approx(0.01 + 0.001 + 0.5)


def test_one_lease_takes_at_most_a_hundred_messages() -> None:
    run = simulate(COSTS, messages=250, hold=0.5)
    assert run.starts == pytest.approx([0.011] * 100 + [0.012] * 100 + [0.013] * 50)


def test_the_automatic_cap_is_the_consumers_own() -> None:
    run = simulate(FREE, messages=limits.MAX_CONCURRENCY + 50, hold=1.0)
    assert run.peak == limits.MAX_CONCURRENCY
    assert run.makespan == 2.0


def test_a_capped_consumer_runs_in_waves_each_after_the_settles() -> None:
    run = simulate(COSTS, messages=40, hold=0.5, max_concurrency=5)
    assert run.peak == 5
    # The slots free when their batches have settled; the dispatcher then spends one step on the
    # next wave.
    first_wave_end = run.ends[0]
    assert run.starts[:5] == pytest.approx([0.011] * 5)
    assert run.starts[5] == pytest.approx(first_wave_end + 0.002 + 0.001)
    assert run.makespan == pytest.approx(8 * 0.5 + 0.01 + 0.001 + 7 * 0.003, abs=1e-9)


def test_batches_fill_to_the_batch_size_and_a_short_one_waits_its_timeout() -> None:
    run = simulate(FREE, messages=25, hold=0.1, max_concurrency=2, max_batch_size=10, max_batch_timeout=1.0)
    # Two full batches at once, each handling its ten one after another.
    assert run.starts[:3] == pytest.approx([0.0, 0.1, 0.2])
    assert run.starts[10] == 0.0
    assert run.invocations[:2] == ((0.0, pytest.approx(1.0)), (0.0, pytest.approx(1.0)))
    # The last five are leased when a slot frees (at 1.0) and wait the 1 s timeout from then.
    assert run.invocations[2] == (pytest.approx(2.0), pytest.approx(2.5))


def test_a_batch_timeout_of_zero_sends_a_short_batch_at_once() -> None:
    run = simulate(FREE, messages=3, hold=1.0, max_batch_size=10, max_batch_timeout=0.0)
    assert run.invocations == ((0.0, 3.0),)
    assert run.starts == (0.0, 1.0, 2.0)


def test_the_postgresql_preset_is_slower_to_notice_and_settle_than_sqlite() -> None:
    sqlite = simulate("conveyor", messages=40, hold=0.5, max_concurrency=5)
    postgres = simulate(ConveyorModel.postgresql(), messages=40, hold=0.5, max_concurrency=5)
    assert sqlite.makespan < postgres.makespan < 4.2
    across = simulate(ConveyorModel.sqlite(sender_in_process=False), messages=1, hold=0.0)
    assert across.starts[0] > simulate("conveyor", messages=1, hold=0.0).starts[0]


def test_no_messages_is_an_empty_run() -> None:
    run = simulate("conveyor", messages=0)
    assert (run.starts, run.ends, run.peak, run.makespan) == ((), (), 0, 0.0)
