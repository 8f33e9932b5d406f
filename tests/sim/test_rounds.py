"""The planner's round model in Python: servers fill the messages in order, each message's checks
run ``at_a_time`` at once, and the search tries each distinct shape once."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conveyor import InvalidSetting
from conveyor.sim import ConveyorModel, Fleet, Shape, predict_round, search_shapes

FREE = ConveyorModel("no costs", 0.0, 0.0, 0.0)


def test_servers_are_dealt_to_the_messages_in_turn_and_an_empty_one_is_not_sent() -> None:
    assert Shape(19, 5, 3).servers_per_message(21) == [2, 2] + [1] * 17
    assert Shape(3, 4, 2).servers_per_message(10) == [4, 3, 3]
    assert Shape(30, 5, 3).servers_per_message(21) == [1] * 21
    assert Shape(2, 5, 3).servers_per_message(21) == [5, 5]  # the rest wait for the next round
    assert Shape(0, 0, 0).servers_per_message(21) == [21]


def test_packed_the_first_messages_take_full_shares() -> None:
    assert Shape(19, 5, 3).servers_per_message(21, "pack") == [5, 5, 5, 5, 1] + [0] * 14
    assert Shape(3, 4, 2).servers_per_message(10, "pack") == [4, 4, 2]


def test_a_message_checks_its_servers_in_waves_of_at_a_time() -> None:
    p = predict_round(Fleet(7, 1.0, 60), Shape(1, 7, 3), FREE)
    # Three waves: 3, 3, then the seventh server alone.
    assert sorted(p.check_intervals) == [(0.0, 1.0)] * 3 + [(1.0, 2.0)] * 3 + [(2.0, 3.0)]
    assert (p.round_seconds, p.peak, p.peak_checks) == (3.0, 1, 3)


def test_the_single_loop_checks_one_server_after_another() -> None:
    p = predict_round(Fleet(4, 2.0, 60), Shape(0, 0, 0), FREE)
    assert p.check_intervals == ((0.0, 2.0), (2.0, 4.0), (4.0, 6.0), (6.0, 8.0))
    assert (p.peak, p.peak_checks, p.margin) == (1, 1, 7.5)


def test_a_shape_too_small_for_the_fleet_leaves_servers_for_the_next_round() -> None:
    p = predict_round(Fleet(21, 0.55, 300), Shape(2, 5, 3), FREE)
    assert (p.unchecked, p.risk) == (11, "high")


def test_the_search_tries_each_distinct_shape_once_and_covers_the_fleet() -> None:
    spread = search_shapes(Fleet(21, 0.55, 300), FREE)
    assert {p.shape.messages for p in spread} == set(range(22))
    packed = search_shapes(Fleet(21, 0.55, 300), FREE, fill="pack")
    # Packed, 8 messages of 3 would leave one empty: that round is 7 of 3's, so only 7 is tried.
    assert {p.shape.messages for p in packed} == {0, 1, 2, 3, 4, 5, 6, 7, 11, 21}
    for ranked in (spread, packed):
        assert len(ranked) == len({(p.shape.messages, p.shape.at_a_time) for p in ranked})
        assert all(p.unchecked == 0 for p in ranked)
        assert str(ranked[0].shape) == "7×3×3"


def test_an_unknown_fill_is_refused() -> None:
    with pytest.raises(InvalidSetting, match="fill is 'even'; it must be one of spread, pack"):
        predict_round(Fleet(21, 0.55, 300), Shape(19, 5, 3), fill="even")  # type: ignore[arg-type]


def test_the_search_prefers_a_safe_round_to_a_fast_risky_one() -> None:
    # A deadline the single loop misses: every shape that makes it ranks before the ones that do not.
    ranked = search_shapes(Fleet(21, 5.5, 100), "cloudflare")
    risks = [p.risk for p in ranked]
    assert risks == sorted(risks, key=["low", "medium", "high"].index)
    assert Shape(0, 0, 0) in [p.shape for p in ranked if p.risk == "high"]
    assert ranked[0].risk == "low"


def test_import_conveyor_sim_works_on_its_own() -> None:
    code = "import conveyor.sim; print(conveyor.sim.simulate('cloudflare').makespan)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "254.0"


@pytest.mark.parametrize("text", ["19x5x3", "19×5×3", " 19 * 5 * 3 "])
def test_a_shape_is_written_messages_by_per_message_by_at_a_time(text: str) -> None:
    assert Shape.parse(text) == Shape(19, 5, 3)
