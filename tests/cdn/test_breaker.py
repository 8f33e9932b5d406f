"""The primary bucket's circuit breaker (:class:`conveyor.cdn.sources.CircuitBreaker`): closed, open
for its cooldown, then one probe at a time; ``refuses`` tells without taking the probe."""

from __future__ import annotations

from conveyor.cdn.sources import CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_refuses_says_what_allow_would_without_taking_the_probe() -> None:
    clock = Clock()
    breaker = CircuitBreaker(failures=3, cooldown_seconds=5.0, clock=clock)
    assert not breaker.refuses() and breaker.allow()
    for _ in range(3):
        breaker.failure()
    assert breaker.is_open and breaker.refuses() and not breaker.allow()
    clock.now += 5.0
    assert not breaker.refuses() and not breaker.refuses()  # asking twice leaves the probe there
    assert breaker.allow()  # the probe
    assert breaker.refuses() and not breaker.allow()  # one probe at a time
    breaker.failure()
    assert breaker.refuses()  # open again for another cooldown
    clock.now += 5.0
    assert breaker.allow()
    breaker.success()
    assert not breaker.is_open and not breaker.refuses() and breaker.allow() and breaker.allow()
