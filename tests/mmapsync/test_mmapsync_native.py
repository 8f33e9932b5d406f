"""The atomics helper is built on first import into a per-user cache, or refused with a clear error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = "import conveyor.mmapsync, sys; print(sys.modules['conveyor.mmapsync._atomics'].__file__)"


def _import_in_a_fresh_process(cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "CONVEYOR_NATIVE_CACHE": str(cache), **env}
    return subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=environment)


def test_the_first_import_builds_the_helper_and_later_ones_reuse_it(tmp_path: Path) -> None:
    first = _import_in_a_fresh_process(tmp_path)
    assert first.returncode == 0, first.stderr
    library = Path(first.stdout.strip())
    assert library.parent == tmp_path
    built_at = library.stat().st_mtime_ns
    second = _import_in_a_fresh_process(tmp_path)
    assert Path(second.stdout.strip()) == library
    assert library.stat().st_mtime_ns == built_at
    assert [path.name for path in tmp_path.iterdir()] == [library.name]


def test_without_a_compiler_the_import_fails_saying_so(tmp_path: Path) -> None:
    done = _import_in_a_fresh_process(tmp_path, CC=str(tmp_path / "no-such-cc"))
    assert done.returncode != 0
    assert "NativeBuildError" in done.stderr
    assert "needs a C compiler" in done.stderr
    assert list(tmp_path.iterdir()) == []
