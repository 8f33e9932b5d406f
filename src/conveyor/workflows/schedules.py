"""Cron expressions of ``@app.workflow(schedules=[...])``, checked when the workflow is declared.

Five fields (minute hour day-of-month month day-of-week), each ``*``, a number, a range ``a-b``,
a list ``a,b`` and steps ``*/n`` or ``a-b/n``; months and week days also by their English
three-letter names. (This slice stores the schedules; starting instances on ticks comes next.)

>>> check_cron("*/10 * * * *")
'*/10 * * * *'
"""

from __future__ import annotations

from conveyor.workflows.errors import InvalidStepConfig

_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 7))
_NAMES = {
    3: {
        m: i + 1
        for i, m in enumerate(["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])
    },
    4: {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])},
}


def check_cron(expression: object) -> str:
    """``expression`` if it is a valid five-field cron expression, else ``InvalidStepConfig``."""
    if not isinstance(expression, str):
        raise InvalidStepConfig(f"schedule {expression!r} is not a cron expression string")
    fields = expression.split()
    if len(fields) != 5:
        raise InvalidStepConfig(f"schedule {expression!r} has {len(fields)} fields; a cron expression has 5")
    for index, (field, (what, low, high)) in enumerate(zip(fields, _FIELDS, strict=True)):
        for part in field.split(","):
            if not _valid_part(part.lower(), low, high, _NAMES.get(index, {})):
                raise InvalidStepConfig(
                    f"schedule {expression!r}: {what} field {field!r} is invalid (values {low}-{high})"
                )
    return expression


def _valid_part(part: str, low: int, high: int, names: dict[str, int]) -> bool:
    base, slash, step = part.partition("/")
    if slash and not (step.isdigit() and int(step) >= 1):
        return False
    if base == "*":
        return True
    start, dash, end = base.partition("-")
    values = [start, end] if dash else [start]
    numbers = []
    for value in values:
        if value in names:
            numbers.append(names[value])
        elif value.isdigit():
            numbers.append(int(value))
        else:
            return False
    if any(not low <= n <= high for n in numbers):
        return False
    return not dash or numbers[0] <= numbers[1]
