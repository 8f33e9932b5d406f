"""Durations as Cloudflare Workflows writes them: seconds, or strings like ``"1 hour"``.

>>> parse_duration("10 minutes")
600.0
>>> parse_duration(30)
30.0
"""

from __future__ import annotations

import re

from conveyor.workflows.errors import InvalidStepConfig

_UNITS = {
    "millisecond": 0.001,
    "second": 1.0,
    "minute": 60.0,
    "hour": 3600.0,
    "day": 86_400.0,
    "week": 7 * 86_400.0,
    "month": 30 * 86_400.0,
    "year": 365 * 86_400.0,
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+?)s?\s*\Z")


def parse_duration(value: object, what: str = "duration") -> float:
    """Seconds in ``value``: a non-negative number of seconds, or ``"N unit"`` with a unit of
    millisecond, second, minute, hour, day, week, month (30 days) or year (365 days), singular or
    plural. Anything else is :class:`InvalidStepConfig` naming ``what`` and the value."""
    if isinstance(value, bool):
        raise InvalidStepConfig(f"{what} is {value!r}; give seconds or a string like '10 minutes'")
    if isinstance(value, int | float):
        if value < 0 or value != value or value == float("inf"):
            raise InvalidStepConfig(f"{what} is {value!r}; it must be a finite number of seconds >= 0")
        return float(value)
    if isinstance(value, str):
        match = _DURATION.match(value.lower())
        if match and match.group(2) in _UNITS:
            return float(match.group(1)) * _UNITS[match.group(2)]
    units = ", ".join(_UNITS)
    raise InvalidStepConfig(f"{what} is {value!r}; give seconds or 'N unit' with a unit of {units}")
