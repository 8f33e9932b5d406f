"""The planner's model of a fan-out round: a fleet, a shape, and what a consumer model makes of them.

A round sends ``messages`` messages at once; each is one invocation that checks up to
``per_message`` servers, ``at_a_time`` at once, so a message with ``n`` servers holds its invocation
``ceil(n / at_a_time)`` checks long. How the servers are dealt to the messages (``fill``):

- ``"spread"``: one to each message in turn, as ``conveyor.prober``'s tick deals out the targets it
  claimed; a message left without a server is not sent;
- ``"pack"``: the first messages take a full share each, as invocations that claim their servers
  when they run do (the reference's prober); the messages past the fleet still run, finding nothing.

``messages=0`` is the single loop the fan-out replaces: one invocation checking every server one
after another.

Staleness: every server must be checked within ``deadline`` seconds of the round's mark (the
send). A round's *margin* is how many times slower than predicted it could run and still make it;
the reference's slowest fan-out round took 1.8 times its median, so a margin under 2 is a risk.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from conveyor.errors import InvalidSetting
from conveyor.sim.cloudflare import CloudflareModel
from conveyor.sim.dispatcher import ConveyorModel
from conveyor.sim.simulation import Simulation, model_named, most_open, simulate, step_curve

# A margin under this is a "medium" risk: the reference's slowest round was 1.8 x its median.
SAFE_MARGIN = 2.0
# Shapes whose rounds are within this fraction of the fastest are equally fast to the search, which
# then prefers fewer checks at once and fewer messages (measured rounds vary more than this).
TIE_FRACTION = 0.05
# The search's default bounds: a round's messages go out in one send_batch (at most 100 messages),
# and the reference's prober checked 3 servers at a time.
SEARCH_MAX_MESSAGES = 100
SEARCH_MAX_AT_A_TIME = 3

Fill = Literal["spread", "pack"]
FILLS: tuple[Fill, ...] = ("spread", "pack")

_SHAPE = re.compile(r"^\s*(\d+)\s*[x×*]\s*(\d+)\s*[x×*]\s*(\d+)\s*$")


def _seconds(name: str, value: object, *, positive: bool) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
        or (positive and value == 0)
    ):
        kind = "more than 0" if positive else "0 or more"
        raise InvalidSetting(f"{name} is {value!r}; it must be a finite number of seconds, {kind}")
    return float(value)


def _count(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidSetting(f"{name} is {value!r}; it must be a whole number, {low} or more")
    return value


@dataclass(frozen=True, slots=True)
class Fleet:
    """``servers`` checked each round, each check taking ``check_seconds``; every server must be
    checked within ``deadline`` seconds of the round's mark."""

    servers: int
    check_seconds: float
    deadline: float

    def __post_init__(self) -> None:
        _count("servers", self.servers, 1)
        _seconds("check_seconds", self.check_seconds, positive=True)
        _seconds("deadline", self.deadline, positive=True)


@dataclass(frozen=True, slots=True)
class Shape:
    """``messages`` × ``per_message`` × ``at_a_time``; ``Shape(0, 0, 0)`` is the single loop.

    >>> Shape.parse("19x5x3"), Shape.parse("0")
    (Shape(messages=19, per_message=5, at_a_time=3), Shape(messages=0, per_message=0, at_a_time=0))
    """

    messages: int
    per_message: int
    at_a_time: int

    def __post_init__(self) -> None:
        _count("messages", self.messages, 0)
        if self.messages == 0:
            if self.per_message or self.at_a_time:
                raise InvalidSetting("messages is 0 (the single loop): per_message and at_a_time must be 0 too")
            return
        _count("per_message", self.per_message, 1)
        _count("at_a_time", self.at_a_time, 1)

    @classmethod
    def parse(cls, text: str) -> Shape:
        """``"MESSAGESxPER_MESSAGExAT_A_TIME"`` (``x``, ``×`` or ``*``), or ``"0"`` for the single loop."""
        if text.strip() == "0":
            return cls(0, 0, 0)
        match = _SHAPE.match(text)
        if match is None:
            raise InvalidSetting(
                f"shape is {text!r}; write MESSAGESxPER_MESSAGExAT_A_TIME (for example 19x5x3), "
                "or 0 for the single loop"
            )
        return cls(*(int(part) for part in match.groups()))

    def __str__(self) -> str:
        return "single loop" if self.messages == 0 else f"{self.messages}×{self.per_message}×{self.at_a_time}"

    def servers_per_message(self, servers: int, fill: Fill = "spread") -> list[int]:
        """How many servers each message sent checks (see the module's docstring for ``fill``)."""
        if self.messages == 0:
            return [servers]
        if fill == "pack":
            return [max(0, min(self.per_message, servers - i * self.per_message)) for i in range(self.messages)]
        dealt = min(servers, self.messages * self.per_message)
        shares = [dealt // self.messages + (i < dealt % self.messages) for i in range(self.messages)]
        return [n for n in shares if n]


@dataclass(frozen=True, slots=True)
class RoundPrediction:
    """What ``model`` predicts for one round of ``fleet`` in ``shape``; times after the round's mark."""

    fleet: Fleet
    shape: Shape
    fill: Fill
    simulation: Simulation
    servers_per_message: tuple[int, ...]
    check_intervals: tuple[tuple[float, float], ...]  # (start, end) of every check made

    @property
    def model(self) -> str:
        return self.simulation.model

    @property
    def from_mark(self) -> float:
        """When the last check finished."""
        return max((end for _, end in self.check_intervals), default=0.0)

    @property
    def round_seconds(self) -> float:
        """From the first invocation's start to the last finished check (the reference's round time)."""
        return self.from_mark - min(self.simulation.starts, default=0.0)

    @property
    def peak(self) -> int:
        """The most invocations running at once."""
        return self.simulation.peak

    @property
    def peak_checks(self) -> int:
        """The most checks running at once, across all invocations."""
        return most_open(self.check_intervals)

    def checks_curve(self) -> list[tuple[float, int]]:
        """Checks running over the round, as :meth:`Simulation.concurrency` gives invocations."""
        return step_curve(self.check_intervals)

    @property
    def unchecked(self) -> int:
        """Servers this shape leaves for the next round (messages × per_message is short of the fleet)."""
        return self.fleet.servers - len(self.check_intervals)

    @property
    def late(self) -> int:
        """Servers whose check finishes after the deadline."""
        return sum(end > self.fleet.deadline for _, end in self.check_intervals)

    @property
    def margin(self) -> float:
        """How many times slower the round could run and still check every server by the deadline."""
        return math.inf if self.from_mark == 0 else self.fleet.deadline / self.from_mark

    @property
    def risk(self) -> str:
        """``high``: a server is late or left out; ``medium``: the margin is under 2; else ``low``."""
        if self.unchecked or self.late:
            return "high"
        return "medium" if self.margin < SAFE_MARGIN else "low"

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "servers": self.fleet.servers,
            "check_seconds": self.fleet.check_seconds,
            "deadline": self.fleet.deadline,
            "messages": self.shape.messages,
            "per_message": self.shape.per_message,
            "at_a_time": self.shape.at_a_time,
            "fill": self.fill,
            "round_seconds": round(self.round_seconds, 6),
            "from_mark_seconds": round(self.from_mark, 6),
            "peak_concurrency": self.peak,
            "peak_checks": self.peak_checks,
            "late": self.late,
            "unchecked": self.unchecked,
            "margin": None if math.isinf(self.margin) else round(self.margin, 3),
            "risk": self.risk,
            "starts": [round(t, 6) for t in self.simulation.starts],
            "ends": [round(t, 6) for t in self.simulation.ends],
            "servers_per_message": list(self.servers_per_message),
        }


def predict_round(
    fleet: Fleet,
    shape: Shape,
    model: str | CloudflareModel | ConveyorModel = "conveyor",
    *,
    fill: Fill = "spread",
    max_concurrency: int | None = None,
    message_overhead: float = 0.0,
    check_overhead: float = 0.0,
) -> RoundPrediction:
    """Simulate one round, its servers dealt to the messages by ``fill`` (``"spread"``, as
    ``conveyor.prober`` does, or ``"pack"``). ``message_overhead`` is what an invocation spends
    before its first check, ``check_overhead`` what each check adds (recording it); both default to
    nothing.

    >>> p = predict_round(Fleet(21, 0.55, 300), Shape(19, 5, 3), "conveyor")
    >>> round(p.round_seconds, 2), p.peak, p.servers_per_message[:3]
    (0.56, 19, (2, 2, 1))
    >>> round(predict_round(Fleet(21, 0.55, 300), Shape(19, 5, 3), fill="pack").round_seconds, 2)
    1.1
    """
    if fill not in FILLS:
        raise InvalidSetting(f"fill is {fill!r}; it must be one of {', '.join(FILLS)}")
    message_overhead = _seconds("message_overhead", message_overhead, positive=False)
    check_overhead = _seconds("check_overhead", check_overhead, positive=False)
    shares = shape.servers_per_message(fleet.servers, fill)
    at_a_time = shape.at_a_time or 1
    wave = fleet.check_seconds + check_overhead
    holds = [message_overhead + math.ceil(n / at_a_time) * wave for n in shares]
    run = simulate(model_named(model), len(holds), holds, max_concurrency)
    checks: list[tuple[float, float]] = []
    for start, servers in zip(run.starts, shares, strict=True):
        first = start + message_overhead
        # Each bound from the same expression, so one wave's end is exactly the next one's start
        # (and to the nanosecond, as the simulation's times).
        checks += [
            (round(first + (i // at_a_time) * wave, 9), round(first + (i // at_a_time + 1) * wave, 9))
            for i in range(servers)
        ]
    return RoundPrediction(fleet, shape, fill, run, tuple(shares), tuple(checks))


def search_shapes(
    fleet: Fleet,
    model: str | CloudflareModel | ConveyorModel = "conveyor",
    *,
    max_messages: int = SEARCH_MAX_MESSAGES,
    max_at_a_time: int = SEARCH_MAX_AT_A_TIME,
    fill: Fill = "spread",
    max_concurrency: int | None = None,
    message_overhead: float = 0.0,
    check_overhead: float = 0.0,
) -> list[RoundPrediction]:
    """Every shape that checks the whole fleet in one round, best first: the single loop, and for
    each message count up to ``max_messages`` the fewest servers per message that cover the fleet,
    with 1 to ``max_at_a_time`` checks at a time. Packed, a message count that would leave messages
    empty (8 messages of 3 for 21 servers) is the same round as a smaller one, and is not tried.

    Best: the lowest risk, then the fastest round; rounds within 5 % of each other count as equally
    fast, and among those fewer checks at once, then fewer messages, then fewer at a time win.
    """
    _count("max_messages", max_messages, 1)
    _count("max_at_a_time", max_at_a_time, 1)
    chosen = model_named(model)
    shapes = [Shape(0, 0, 0)]
    for messages in range(1, min(max_messages, fleet.servers) + 1):
        per_message = math.ceil(fleet.servers / messages)
        if fill == "pack" and math.ceil(fleet.servers / per_message) < messages:
            continue
        shapes += [Shape(messages, per_message, a) for a in range(1, min(per_message, max_at_a_time) + 1)]
    predictions = [
        predict_round(
            fleet,
            shape,
            chosen,
            fill=fill,
            max_concurrency=max_concurrency,
            message_overhead=message_overhead,
            check_overhead=check_overhead,
        )
        for shape in shapes
    ]
    return rank(predictions)


_RISKS = {"low": 0, "medium": 1, "high": 2}


def rank(predictions: list[RoundPrediction]) -> list[RoundPrediction]:
    """``predictions`` best first (see :func:`search_shapes`)."""
    fastest: dict[str, float] = {}
    for p in predictions:
        fastest[p.risk] = min(fastest.get(p.risk, math.inf), p.from_mark)

    def key(p: RoundPrediction) -> tuple[float, ...]:
        tied = p.from_mark <= fastest[p.risk] * (1 + TIE_FRACTION)
        speed = 0.0 if tied else p.from_mark
        return (_RISKS[p.risk], speed, p.peak_checks, p.shape.messages, p.shape.at_a_time, p.from_mark)

    return sorted(predictions, key=key)


def curve(predictions: list[RoundPrediction]) -> list[RoundPrediction]:
    """The fastest round for each message count (0, the single loop, first): the search's curve."""
    best: dict[int, RoundPrediction] = {}
    for p in predictions:
        kept = best.get(p.shape.messages)
        if kept is None or p.from_mark < kept.from_mark:
            best[p.shape.messages] = p
    return [best[m] for m in sorted(best)]
