"""Hatchling build hook: compile mmapsync's C helper (``src/conveyor/mmapsync/_atomics.c``) into the wheel.

Why a hook of the backend the project already uses, not setuptools or scikit-build-core: the helper
is one C file with no dependencies, so one compiler call is the whole build, and hatchling keeps the
package's file selection (the ``.sql`` files, the stubs) as it is.

- A standard wheel gets the built ``conveyor/mmapsync/_atomics<EXT_SUFFIX>`` and the interpreter's
  platform tag (``cp311-cp311-linux_x86_64``).
- An editable install (``uv sync``) builds the helper in place, beside its source (ignored by git),
  because the editable wheel only points the interpreter at ``src/``. ``[tool.uv] cache-keys``
  makes uv rebuild when the C source or this file changes, and the loader refuses a helper built
  from another source than the one beside it (``_native.py``), so an edited helper is never stale
  unnoticed.
- Without a working compiler (``$CC``, else the one CPython was built with; or no Python headers),
  the build does not fail: it warns and the wheel stays pure (``py3-none-any``). Then importing
  ``conveyor.mmapsync`` raises ``NativeBuildError`` saying what to install, and the SQLite engine
  reads its catalog instead of the shared-memory snapshot (``engine/sqlite/snapshot_store.py``).

The helper is built with ``-DATOMICS_SOURCE_SHA256=...``, the hash of the source it came from, which
the loader compares with the source installed beside it.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGE = "conveyor/mmapsync"
SOURCE = f"src/{PACKAGE}/_atomics.c"


def compiler() -> list[str]:
    return shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")


def compile_helper(source: Path, library: Path) -> str:
    """Build ``source`` into the shared object ``library``; return why not ('' when built)."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    command = [
        *compiler(),
        "-O2",
        "-Wall",
        "-shared",
        "-fPIC",
        f'-DATOMICS_SOURCE_SHA256="{digest}"',
        f"-I{sysconfig.get_paths()['include']}",
        str(source),
        "-o",
        str(library),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        return f"no C compiler ({exc})"
    if done.returncode != 0:
        return f"{shlex.join(command)} failed:\n{done.stderr.strip()}"
    return ""


class AtomicsBuildHook(BuildHookInterface):
    """Compiles the helper for the ``wheel`` target, standard and editable."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        name = f"_atomics{sysconfig.get_config_var('EXT_SUFFIX')}"
        root = Path(self.root)
        self._scratch = Path(tempfile.mkdtemp(prefix="conveyor-atomics-"))
        built = self._scratch / name
        failure = compile_helper(root / SOURCE, built)
        if failure:
            self.app.display_warning(
                f"mmapsync's C helper was not built, so conveyor.mmapsync will be unavailable "
                f"(the SQLite engine then reads its catalog directly): {failure}"
            )
            return
        if version == "editable":
            # Copied beside the target and renamed over it, so a process importing the helper
            # meanwhile sees the old file or the new one, never half of one.
            target = root / "src" / PACKAGE / name
            shutil.copyfile(built, target.with_name(f".{name}.new"))
            os.replace(target.with_name(f".{name}.new"), target)
            return
        build_data["force_include"][str(built)] = f"{PACKAGE}/{name}"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)
