"""Loading the code a worker runs, from names its operator typed on the command line.

This is the only place Conveyor imports user code, and it is given names only by ``conveyor worker
APP`` and ``conveyor serve --worker APP / --handlers MODULE``: never a name from a request or a
stored row. A push consumer registered through the API names a script (``module:function``); a
worker runs it only if that name is among the handlers its command line loaded.

>>> app = load_app("myapp.workers:app")
>>> handlers = module_handlers(import_operator_module("myapp.consumers"))
>>> sorted(handlers)
['myapp.consumers:resize', 'myapp.consumers:send_email']
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from types import ModuleType

from conveyor.consumer.app import App
from conveyor.consumer.runner import Handler


class LoadError(Exception):
    """A name on the command line that does not lead to what it should; the message says why."""


def import_operator_module(module_name: str) -> ModuleType:
    """Import ``module_name`` with the current directory on ``sys.path`` (as ``python -m`` does).

    ``LoadError`` if the module itself is missing; an error raised while it runs (a dependency of
    its own missing included) propagates, so its traceback shows the real cause.
    """
    if not all(part.isidentifier() for part in module_name.split(".")):  # "", ".x", "a..b", "a b"
        raise LoadError(f"{module_name!r} is not a module name, e.g. myapp.consumers")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    importlib.invalidate_caches()  # a module written since the last try must be found
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise
        raise LoadError(f"cannot import module {module_name!r}: {exc} (searched the current directory too)") from None


def load_app(target: str) -> App:
    """The ``conveyor.App`` named by ``module:attribute``."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise LoadError(f"{target!r} is not module:attribute, e.g. myapp.workers:app")
    app: object = import_operator_module(module_name)
    for part in attribute.split("."):
        try:
            app = getattr(app, part)
        except AttributeError:
            raise LoadError(f"module {module_name!r} has no attribute {attribute!r}") from None
    if not isinstance(app, App):
        raise LoadError(
            f"{target} is of type {type(app).__name__}, not conveyor.App; create one with app = conveyor.App()"
        )
    return app


def module_handlers(module: ModuleType) -> dict[str, Handler]:
    """The public functions *defined in* ``module``, by script name ``module:function``.

    Functions the module merely imports (``from os import system``) are not its own and are left
    out, as are names starting with ``_`` and anything that is not a plain or ``async`` function.
    """
    handlers: dict[str, Handler] = {}
    for name, value in vars(module).items():
        if name.startswith("_") or not inspect.isfunction(value):
            continue
        if value.__module__ == module.__name__ and value.__qualname__ == name:
            handlers[f"{module.__name__}:{name}"] = value
    return handlers
