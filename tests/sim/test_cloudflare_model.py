"""The fitted Cloudflare ramp against the reference's replayed numbers (workloads.md §3)."""

from __future__ import annotations

import pytest

from conveyor.sim import CloudflareModel, simulate

# Nine 60 s messages sent at once: the fitted model's replay, and what Cloudflare measured.
REPLAYED_STARTS = [2, 62, 74, 123, 135, 135, 147, 183, 195]
REPLAYED_END = 255
MEASURED_END = 257


def test_nine_sixty_second_messages_replay_the_reference_ramp() -> None:
    run = simulate("cloudflare", messages=9, hold=60.0)
    for start, replayed in zip(sorted(run.starts), REPLAYED_STARTS, strict=True):
        assert start == pytest.approx(replayed, abs=2.0), (sorted(run.starts), REPLAYED_STARTS)
    assert run.makespan == pytest.approx(REPLAYED_END, abs=3.0)
    assert run.makespan <= MEASURED_END
    assert run.peak == 4  # the model's; Cloudflare's measured curve touched five (docs/sim.md says why)


def test_one_consumer_first_then_one_more_twelve_seconds_after_each_finish() -> None:
    run = simulate("cloudflare", messages=3, hold=60.0)
    # The second starts the moment the first ends; the third is allowed 12 s after that finish.
    assert run.starts == (2.0, 62.0, 74.0)
    assert run.concurrency() == [(0.0, 0), (2.0, 1), (74.0, 2), (122.0, 1), (134.0, 0)]


def test_short_invocations_ramp_faster_than_long_ones() -> None:
    # The same 540 s of work: the ramp grows with finishes, so many short holds grow it fast.
    long = simulate("cloudflare", messages=9, hold=60.0)
    short = simulate("cloudflare", messages=90, hold=6.0)
    assert (long.makespan, long.peak) == (254.0, 4)
    assert (short.makespan, short.peak) == (74.0, 28)


def test_max_concurrency_caps_the_ramp() -> None:
    run = simulate("cloudflare", messages=30, hold=1.0, max_concurrency=2)
    assert run.peak == 2
    assert simulate("cloudflare", messages=30, hold=1.0).peak > 2


def test_a_batch_handles_its_messages_one_after_another() -> None:
    run = simulate("cloudflare", messages=4, hold=[1.0, 2.0, 3.0, 4.0], max_batch_size=2)
    assert run.starts == (2.0, 3.0, 5.0, 8.0)
    assert run.ends == (3.0, 5.0, 8.0, 12.0)
    assert run.invocations == ((2.0, 5.0), (5.0, 12.0))


def test_a_short_last_batch_waits_for_its_timeout() -> None:
    run = simulate("cloudflare", messages=3, hold=1.0, max_batch_size=2, max_batch_timeout=10.0, max_concurrency=5)
    # The full batch starts at the first start; the short one waits 10 s from the send.
    assert run.invocations == ((2.0, 4.0), (10.0, 11.0))


def test_the_fitted_constants_can_be_changed() -> None:
    faster = simulate(CloudflareModel(first_start=0.0, ramp_step=6.0), messages=9, hold=60.0)
    assert faster.starts[0] == 0.0
    assert faster.makespan < simulate("cloudflare", messages=9, hold=60.0).makespan
