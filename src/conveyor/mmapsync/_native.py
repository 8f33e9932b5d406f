"""Build ``_atomics.c`` on first import and register it as ``conveyor.mmapsync._atomics``.

The helper is compiled with ``$CC``, else the compiler CPython itself was built with (``sysconfig``),
into a per-user cache keyed by the source's hash and the interpreter, so every process after the
first just loads the shared object. Concurrent first imports each compile to a private file and
rename it into place, so they never see a half-written library.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType

from conveyor.mmapsync.errors import NativeBuildError

MODULE_NAME = "conveyor.mmapsync._atomics"
SOURCE = Path(__file__).with_name("_atomics.c")


def cache_dir() -> Path:
    """Where built helpers live: ``$CONVEYOR_NATIVE_CACHE``, else the user's cache directory."""
    configured = os.environ.get("CONVEYOR_NATIVE_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "conveyor" / "native"


def _compiler() -> list[str]:
    return shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")


def _library_path(source: bytes) -> Path:
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    fingerprint = hashlib.sha256(source + sys.version.encode() + " ".join(_compiler()).encode()).hexdigest()
    return cache_dir() / f"_atomics-{fingerprint[:16]}{suffix}"


def _compile(library: Path) -> None:
    fd, scratch = tempfile.mkstemp(dir=library.parent, prefix=".build-", suffix=library.suffix)
    os.close(fd)
    command = [
        *_compiler(),
        "-O2",
        "-Wall",
        "-shared",
        "-fPIC",
        f"-I{sysconfig.get_paths()['include']}",
        str(SOURCE),
        "-o",
        scratch,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        os.unlink(scratch)
        raise NativeBuildError(f"mmapsync needs a C compiler to build its atomics: {exc}") from exc
    if done.returncode != 0:
        os.unlink(scratch)
        raise NativeBuildError(f"building {SOURCE.name} failed:\n{done.stderr.strip()}")
    os.replace(scratch, library)


def load() -> ModuleType:
    """Return the helper module, building it first if this interpreter has no copy yet."""
    loaded = sys.modules.get(MODULE_NAME)
    if loaded is not None:
        return loaded
    library = _library_path(SOURCE.read_bytes())
    try:
        library.parent.mkdir(parents=True, exist_ok=True)
    except OSError:  # no writable home: fall back to a per-user directory under the temp dir
        library = Path(tempfile.gettempdir()) / f"conveyor-native-{os.getuid()}" / library.name
        library.parent.mkdir(mode=0o700, exist_ok=True)
    if not library.exists():
        _compile(library)
    spec = importlib.util.spec_from_file_location(MODULE_NAME, library)
    if spec is None or spec.loader is None:
        raise NativeBuildError(f"cannot load {library}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[MODULE_NAME] = module
    return module


load()
