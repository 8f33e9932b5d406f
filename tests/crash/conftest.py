"""Fixtures of the crash tests: the random moments of the kills come from a seeded generator whose
seed is printed (pytest shows it with a failure), so a failing run can be replayed exactly."""

from __future__ import annotations

import os
import random

import pytest

SEED_VARIABLE = "CONVEYOR_CRASH_SEED"


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> random.Random:
    """A generator seeded from ``$CONVEYOR_CRASH_SEED``, else from the system's entropy."""
    given = os.environ.get(SEED_VARIABLE)
    seed = int(given) if given else random.SystemRandom().randrange(2**32)
    print(f"{request.node.name}: seed {seed} (replay with {SEED_VARIABLE}={seed})")
    request.node.user_properties.append(("seed", seed))
    return random.Random(seed)
