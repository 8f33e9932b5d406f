"""``conveyor plan``: a round's prediction per shape, the search for the best shape, the curve as
a table, JSON lines and an image, and a clear refusal of every bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from conveyor.cli.main import cli

FLEET = ["--servers", "21", "--check-seconds", "0.55"]


def plan(*args: str) -> Result:
    return CliRunner().invoke(cli, ["plan", *args], catch_exceptions=False)


def lines(*args: str) -> list[dict[str, Any]]:
    result = plan(*args, "--json")
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_the_prober_shape_checks_the_fleet_in_one_wave_where_the_loop_takes_twenty_one() -> None:
    loop, fan_out = lines(*FLEET, "--shape", "0", "--shape", "19x5x3")
    assert loop["round_seconds"] == pytest.approx(21 * 0.55, abs=0.01)
    # Dealt in turn, as conveyor.prober's tick does: two messages of two servers, seventeen of one.
    assert fan_out["servers_per_message"] == [2, 2] + [1] * 17
    assert fan_out["fill"] == "spread"
    assert fan_out["round_seconds"] == pytest.approx(0.55, abs=0.02)
    # The dispatcher's costs are in it: the notice, then one step for each of the 19 messages.
    assert fan_out["from_mark_seconds"] == pytest.approx(0.55 + 0.0003 + 0.0004)  # one lease: all 19
    assert (fan_out["peak_concurrency"], fan_out["peak_checks"], fan_out["risk"]) == (19, 21, "low")
    assert len(fan_out["starts"]) == 19


def test_packed_the_prober_shape_takes_two_waves_in_five_invocations() -> None:
    [packed] = lines(*FLEET, "--shape", "19x5x3", "--fill", "pack")
    # Four invocations of five servers (two waves of three, then two) and one of the last server;
    # the fourteen left over run and find nothing.
    assert packed["servers_per_message"] == [5, 5, 5, 5, 1] + [0] * 14
    assert packed["round_seconds"] == pytest.approx(2 * 0.55, abs=0.02)
    assert (packed["peak_concurrency"], packed["peak_checks"]) == (5, 13)


def test_the_table_shows_each_shape_and_its_curve() -> None:
    result = plan(*FLEET, "--shape", "0", "--shape", "19x5x3")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "21 servers, 0.55 s a check, deadline 300 s" in out
    assert "conveyor (sqlite; notice / step / settle 0.3 / 0.4 / 2 ms)" in out
    assert "servers dealt to the messages in turn" in out
    [row] = [line for line in out.splitlines() if "19×5×3" in line and "│" in line]
    assert "0.55 s" in row and " 19 " in row and " 21 " in row and "low" in row
    assert "invocations " in out and "peak 19" in out and "checks " in out and "peak 21" in out


def test_the_seed_fleet_on_cloudflares_ramp() -> None:
    seed = ["--servers", "21", "--check-seconds", "5.5", "--model", "cloudflare"]
    loop, packed = lines(*seed, "--shape", "0", "--shape", "19x5x3", "--fill", "pack")
    # The single loop: 21 × 5.5 s after the ramp's 2 s first start (the reference measured 116 s).
    assert (loop["round_seconds"], loop["from_mark_seconds"]) == (115.5, 117.5)
    # Cold, the fitted ramp runs the four full invocations two at a time at most.
    assert packed["from_mark_seconds"] == 40.5 and packed["peak_concurrency"] == 2
    # Nineteen invocations of one or two servers wait longer for the ramp than five full ones.
    [spread] = lines(*seed, "--shape", "19x5x3")
    assert spread["from_mark_seconds"] == 46.0


def test_search_finds_the_fewest_messages_that_check_the_fleet_in_one_wave() -> None:
    ranked = lines(*FLEET, "--search")
    best = ranked[0]
    assert (best["messages"], best["per_message"], best["at_a_time"], best["best"]) == (7, 3, 3, True)
    assert best["round_seconds"] == pytest.approx(0.55, abs=0.01)
    assert [line["rank"] for line in ranked] == list(range(1, len(ranked) + 1))
    assert not any(line["best"] for line in ranked[1:])
    assert {"starts", "ends"}.isdisjoint(best)  # a search's lines stay short
    # Every shape tried covers the fleet; the single loop is among them.
    assert all(line["unchecked"] == 0 for line in ranked)
    assert any(line["messages"] == 0 for line in ranked)


def test_search_shows_the_curve_and_the_best_shape() -> None:
    result = plan(*FLEET, "--search", "--max-at-a-time", "5")
    assert result.exit_code == 0, result.output
    assert "Best shape: 5×5×5" in result.stdout
    assert "The fastest round for each number of messages" in result.stdout
    assert "█" in result.stdout


def test_risk_is_high_when_servers_are_late_or_left_out_and_medium_without_a_margin_of_two() -> None:
    left_out, late, tight = (
        lines(*FLEET, "--shape", "2x5x3")[0],
        lines(*FLEET, "--deadline", "10", "--shape", "0")[0],
        lines(*FLEET, "--deadline", "20", "--shape", "0")[0],
    )
    assert (left_out["unchecked"], left_out["risk"]) == (11, "high")
    assert late["late"] > 0 and late["risk"] == "high"
    assert (tight["late"], tight["risk"]) == (0, "medium")


def test_overheads_and_the_engine_lengthen_the_round() -> None:
    plain = lines(*FLEET, "--shape", "19x5x3")[0]
    heavier = lines(*FLEET, "--shape", "19x5x3", "--message-overhead", "0.01", "--check-overhead", "0.005")[0]
    postgres = lines(*FLEET, "--shape", "19x5x3", "--engine", "postgresql")[0]
    # One wave of checks after the invocation's own 10 ms.
    assert heavier["round_seconds"] == pytest.approx(plain["round_seconds"] + 0.01 + 0.005, abs=0.002)
    assert postgres["from_mark_seconds"] > plain["from_mark_seconds"]


def test_measure_takes_the_costs_of_the_deployment_and_leaves_nothing_there(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'data'}"
    result = CliRunner().invoke(cli, ["--url", url, "plan", *FLEET, "--shape", "19x5x3", "--measure"])
    assert result.exit_code == 0, result.output
    assert "conveyor (sqlite, measured; notice / step / settle " in result.stdout
    [row] = [line for line in result.stdout.splitlines() if "19×5×3" in line and "│" in line]
    assert " 19 " in row and " 21 " in row
    listed = CliRunner().invoke(cli, ["--url", url, "queues", "list", "--json"])
    assert json.loads(listed.stdout) == []


def test_a_capped_consumer_runs_the_fan_out_in_turns() -> None:
    capped = lines(*FLEET, "--shape", "21x1x1", "--max-concurrency", "3")[0]
    assert capped["peak_concurrency"] == 3
    assert capped["round_seconds"] == pytest.approx(7 * 0.55, abs=0.1)


def test_plot_writes_an_image_of_the_rounds_and_of_the_search(tmp_path: Path) -> None:
    for args, name in ((["--shape", "0", "--shape", "19x5x3"], "rounds.png"), (["--search"], "search.png")):
        result = plan(*FLEET, *args, "--plot", str(tmp_path / name))
        assert result.exit_code == 0, result.output
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
        assert f"Wrote {tmp_path / name}" in result.output


def test_plot_without_the_plot_extra_names_it_and_prints_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the extra were not installed
    result = plan(*FLEET, "--shape", "0", "--plot", str(tmp_path / "x.png"))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(
        "error: conveyor plan --plot needs the 'plot' extra: pip install 'conveyor[plot]' (not installed: matplotlib)"
    )
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--servers", "0", "--check-seconds", "1", "--shape", "0"],
            "servers is 0; it must be a whole number, 1 or more",
        ),
        (["--servers", "3", "--check-seconds", "0", "--shape", "0"], "check_seconds is 0.0"),
        (["--servers", "3", "--check-seconds", "nan", "--shape", "0"], "check_seconds is nan"),
        (["--servers", "3", "--check-seconds", "1", "--deadline", "-5", "--shape", "0"], "deadline is -5.0"),
        ([*FLEET, "--shape", "19x5"], "shape is '19x5'; write MESSAGESxPER_MESSAGExAT_A_TIME"),
        ([*FLEET, "--shape", "19x0x3"], "per_message is 0"),
        ([*FLEET, "--shape", "19x5x0"], "at_a_time is 0"),
        ([*FLEET, "--shape", "0x5x3"], "messages is 0 (the single loop): per_message and at_a_time must be 0 too"),
        ([*FLEET, "--shape", "0", "--max-concurrency", "0"], "max_concurrency is 0"),
        ([*FLEET, "--shape", "0", "--message-overhead", "-1"], "message_overhead is -1.0"),
        ([*FLEET, "--search", "--max-messages", "0"], "max_messages is 0"),
        ([*FLEET, "--search", "--max-at-a-time", "0"], "max_at_a_time is 0"),
    ],
)
def test_a_bad_figure_is_refused_with_its_name(args: list[str], said: str) -> None:
    result = plan(*args)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: {said}") and result.stderr.endswith("(code 10207)\n"), result.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (FLEET, "give --shape (one or more) or --search"),
        ([*FLEET, "--shape", "0", "--search"], "give --shape (one or more) or --search"),
        ([*FLEET, "--shape", "0", "--model", "cloudflare", "--engine", "sqlite"], "--engine and --measure are for"),
        ([*FLEET, "--shape", "0", "--model", "cloudflare", "--measure"], "--engine and --measure are for"),
        ([*FLEET, "--shape", "0", "--engine", "sqlite", "--measure"], "give --engine (preset costs) or --measure"),
        (
            [*FLEET, "--shape", "0", "--model", "aws"],
            "Invalid value for '--model': 'aws' is not one of 'conveyor', 'cloudflare'",
        ),
    ],
)
def test_a_wrong_combination_of_options_is_a_usage_error(args: list[str], said: str) -> None:
    result = plan(*args)
    assert result.exit_code == 2, result.output
    assert f"error: {said}" in result.stderr
