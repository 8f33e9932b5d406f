"""The atomics helper is the extension built with the package: importing it compiles nothing, writes
nothing into the user's home, and a helper built from another source is refused. (A wheel built
without a compiler: tests/packaging/test_core_install.py.)"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conveyor.mmapsync import NativeBuildError, _native

SCRIPT = "import conveyor.mmapsync, sys; print(sys.modules['conveyor.mmapsync._atomics'].__file__)"


def test_the_helper_is_the_extension_built_beside_its_source_and_importing_it_writes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    environment = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "CC": "no-such-cc"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=environment)
    assert done.returncode == 0, done.stderr
    library = Path(done.stdout.strip())
    assert library == _native.SOURCE.with_name(f"_atomics{sysconfig.get_config_var('EXT_SUFFIX')}")
    assert list(home.iterdir()) == []


def test_the_helper_says_which_source_it_was_built_from() -> None:
    built_from = _native.load().SOURCE_SHA256
    assert built_from == hashlib.sha256(_native.SOURCE.read_bytes()).hexdigest()


def test_a_helper_built_from_another_source_is_refused_saying_how_to_rebuild(tmp_path: Path) -> None:
    edited = tmp_path / "_atomics.c"
    edited.write_bytes(_native.SOURCE.read_bytes() + b"/* edited */\n")
    with pytest.raises(NativeBuildError, match=r"was built from another version of _atomics\.c") as refused:
        _native.check_built_from(_native.load(), edited)
    assert "make .venv/.synced" in str(refused.value)
