"""The optional parts of Conveyor and the extras that install them.

``pip install conveyor`` is the embedded platform and the command line. The parts that need more
third-party code check for it where they are entered (their package's ``__init__``), so a missing
one is an error that says which extra to install, not a ``ModuleNotFoundError`` from deep inside:

>>> import conveyor.server
Traceback (most recent call last):
conveyor.extras.MissingExtra: conveyor.server needs the 'server' extra: pip install 'conveyor[server]' ...
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

# Where a part needs more than one way to install it, the alternatives after the first.
_ALTERNATIVES = {"postgres": " (or 'conveyor[postgres-binary]' for psycopg's prebuilt wheels)"}


class MissingExtra(ImportError):
    """A part of Conveyor was used without the extra that installs its dependencies."""

    def __init__(self, part: str, extra: str, missing: Sequence[str] = ()) -> None:
        message = f"{part} needs the {extra!r} extra: pip install 'conveyor[{extra}]'{_ALTERNATIVES.get(extra, '')}"
        if missing:
            message += f" (not installed: {', '.join(missing)})"
        super().__init__(message, name=missing[0] if missing else None)
        self.part = part
        self.extra = extra


def require_extra(part: str, extra: str, modules: Sequence[str]) -> None:
    """Raise :class:`MissingExtra` unless every top-level module in ``modules`` is installed.

    >>> require_extra("conveyor serve", "server", ("starlette", "uvicorn"))
    """
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    if missing:
        raise MissingExtra(part, extra, missing)
