"""The planner's curves as image files (the ``plot`` extra: matplotlib).

>>> from conveyor.sim.plot import plot_rounds
>>> plot_rounds([predict_round(fleet, Shape(19, 5, 3))], "round.png")
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from conveyor.extras import require_extra

require_extra("conveyor.sim.plot", "plot", ("matplotlib",))

import matplotlib  # noqa: E402 - only once the extra is known to be there

matplotlib.use("Agg")  # files only: no display needed

from matplotlib import pyplot  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from conveyor.sim.rounds import RoundPrediction  # noqa: E402
from conveyor.sim.simulation import Simulation  # noqa: E402


def _steps(curve: list[tuple[float, int]], until: float) -> tuple[list[float], list[int]]:
    times = [t for t, _ in curve] + [until]
    counts = [n for _, n in curve] + [curve[-1][1]]
    return times, counts


def plot_rounds(predictions: Sequence[RoundPrediction], path: str | Path) -> Path:
    """One panel per round: invocations and checks running over the round, the deadline marked."""
    figure, axes = pyplot.subplots(
        len(predictions), 1, figsize=(8, 2.6 * len(predictions)), squeeze=False, layout="constrained"
    )
    for panel, p in zip(axes[:, 0], predictions, strict=True):
        until = max(p.from_mark, p.simulation.makespan) * 1.02 or 1.0
        panel.step(*_steps(p.simulation.concurrency(), until), where="post", label="invocations")
        panel.step(*_steps(p.checks_curve(), until), where="post", label="checks", alpha=0.7)
        if p.fleet.deadline <= until:
            panel.axvline(p.fleet.deadline, color="red", linestyle="--", label="deadline")
        panel.set_title(f"{p.shape} ({p.model}): round {p.round_seconds:.2f} s, risk {p.risk}", fontsize=10)
        panel.set_xlabel("seconds after the round's mark")
        panel.set_ylabel("running")
        panel.legend(loc="upper right", fontsize=8)
    return _save(figure, path)


def plot_search(curve: Sequence[RoundPrediction], best: RoundPrediction, path: str | Path) -> Path:
    """The fastest round for each number of messages, the chosen shape marked."""
    figure, panel = pyplot.subplots(figsize=(8, 4), layout="constrained")
    panel.plot([p.shape.messages for p in curve], [p.from_mark for p in curve], marker="o", markersize=3)
    panel.scatter([best.shape.messages], [best.from_mark], color="red", zorder=3, label=f"best: {best.shape}")
    panel.axhline(best.fleet.deadline, color="red", linestyle="--", label="deadline")
    panel.set_yscale("log")
    panel.set_xlabel("messages per round (0: the single loop)")
    panel.set_ylabel("round, seconds after the mark")
    panel.set_title(f"{best.fleet.servers} servers, {best.fleet.check_seconds:g} s a check ({best.model})", fontsize=10)
    panel.legend(fontsize=8)
    return _save(figure, path)


def plot_simulation(run: Simulation, path: str | Path) -> Path:
    """Invocations running over one simulated run."""
    figure, panel = pyplot.subplots(figsize=(8, 3), layout="constrained")
    panel.step(*_steps(run.concurrency(), run.makespan * 1.02 or 1.0), where="post")
    panel.set_xlabel("seconds after the send")
    panel.set_ylabel("invocations running")
    panel.set_title(f"{len(run.starts)} messages ({run.model}): peak {run.peak}, done at {run.makespan:.2f} s")
    return _save(figure, path)


def _save(figure: Figure, path: str | Path) -> Path:
    target = Path(path)
    figure.savefig(target, dpi=110, bbox_inches="tight")
    pyplot.close(figure)
    return target
