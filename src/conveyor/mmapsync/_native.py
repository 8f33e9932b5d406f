"""Load the C helper built with the package, or refuse clearly: ``conveyor.mmapsync._atomics``.

The helper is compiled when the package is built or installed (``hatch_build.py`` at the project's
root), not here: importing a library should not run a compiler or write into the user's home. A
package built without a C compiler has no helper, and importing mmapsync then raises
:class:`NativeBuildError` saying what to install (the SQLite engine, its main user, reads its catalog
instead). A helper built from another ``_atomics.c`` than the one beside it (an editable install
whose C source changed since it was built) is refused too, because its functions may no longer be
the ones the Python side calls.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import ModuleType

from conveyor.mmapsync.errors import NativeBuildError

SOURCE = Path(__file__).with_name("_atomics.c")
REINSTALL = (
    "install a C compiler and Python's headers, then reinstall conveyor "
    "(in a source checkout: make .venv/.synced, or uv sync)"
)


def check_built_from(module: ModuleType, source: Path) -> None:
    """Refuse ``module`` unless it was built from ``source`` (when that file is there to compare)."""
    try:
        expected = hashlib.sha256(source.read_bytes()).hexdigest()
    except FileNotFoundError:
        return
    built_from = getattr(module, "SOURCE_SHA256", "unknown")
    if built_from != expected:
        raise NativeBuildError(
            f"mmapsync's C helper {module.__file__} was built from another version of {source.name} "
            f"(sha256 {built_from[:12]}, the source beside it is {expected[:12]}): rebuild it: {REINSTALL}"
        )


def load() -> ModuleType:
    try:
        from conveyor.mmapsync import _atomics
    except ImportError as exc:
        raise NativeBuildError(
            f"conveyor.mmapsync needs its C helper, which was not built when conveyor was installed "
            f"(no C compiler then?): {REINSTALL}"
        ) from exc
    check_built_from(_atomics, SOURCE)
    return _atomics


load()
