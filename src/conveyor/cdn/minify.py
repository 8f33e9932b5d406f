"""Which selected files get a minified twin (cdnjs's rules), and the minifier that makes it.

>>> plan_minified({"dist/a.js": "a.js", "dist/b.min.js": "b.min.js"}, all_paths, {"js": True, "css": True})
{'a.js': 'a.min.js'}
>>> minify("a.js", b"var answer = 40 + 2;")
Minified(data=b'var answer=40+2', tool='tdewolff-minify', tool_version='2.24.12')

The rules (cdnjs's step 6): only ``.js`` and ``.css``; never a file already named ``*.min.js`` /
``*.min.css``; never when the source tree (the whole tarball, not only the selected files) has the
sibling ``x.min.js`` / ``x.min.css``; never when the config's ``optimization.js`` / ``.css`` is
false; never when the name it would get is a selected file's. The twin's name replaces the *last*
extension (``a.js/b.js`` → ``a.js/b.min.js``): cdnjs replaces the first ``.js`` in the whole path
(``a.min.js/b.js``), which moves the twin into another directory and can collide with a real file;
we do not copy that quirk (docs/cdn.md).

The minifier is tdewolff/minify (its official Python binding, ``tdewolff-minify`` in the ``cdn``
extra), run in a child Python process per file (:mod:`conveyor.cdn.tool_process`): the file's text
goes in on stdin and the result comes out on stdout, so nothing in a package is ever a path, an
argument or code to the worker; the child is killed after ``timeout`` seconds. A failure (a syntax
error, a file that is not UTF-8, the time limit) is logged by the caller and only means no twin:
the original is still published.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Iterable, Mapping

from conveyor.cdn.tool_process import ToolFailed, installed_version, run_tool

TOOL = "tdewolff-minify"
DEFAULT_TIMEOUT = 60.0
MEDIA_TYPES = {".js": "application/javascript", ".css": "text/css"}

# The child: read stdin as UTF-8, minify as the given media type, write stdout; an error's message
# on stderr with exit status 1 (2: not UTF-8). It imports only the minifier: nothing of Conveyor.
_CHILD = """
import sys
import minify
try:
    text = sys.stdin.buffer.read().decode("utf-8")
except UnicodeDecodeError as exc:
    sys.stderr.write(f"not UTF-8: {exc}")
    sys.exit(2)
try:
    out = minify.string(sys.argv[1], text)
except minify.MinifyError as exc:
    sys.stderr.write(str(exc))
    sys.exit(1)
sys.stdout.buffer.write(out.encode("utf-8"))
"""


class MinifyFailed(Exception):
    """The minifier refused the file or ran out of time; the message says why."""


@dataclasses.dataclass(frozen=True)
class Minified:
    data: bytes
    tool: str
    tool_version: str


def tool_version() -> str:
    """The installed minifier's version, recorded with every file it made."""
    version = installed_version(TOOL)
    if version is None:
        raise MinifyFailed(f"the minifier is not installed: install conveyor[cdn] ({TOOL})")
    return version


def _extension(path: str) -> str:
    return posixpath.splitext(path)[1]


def twin_name(path: str) -> str | None:
    """``dir/x.js`` → ``dir/x.min.js`` (``.css`` likewise); None for a file cdnjs never minifies
    (another extension, or already ``.min``)."""
    stem, ext = posixpath.splitext(path)
    if ext not in MEDIA_TYPES or stem.endswith(".min"):
        return None
    return f"{stem}.min{ext}"


def plan_minified(
    selected: Mapping[str, str], source_paths: Iterable[str], optimization: Mapping[str, bool]
) -> dict[str, str]:
    """``{dest: minified dest}`` for the selected files (``{source path: dest}``) that get a twin:
    ``source_paths`` is every file of the tarball, for cdnjs's sibling rule."""
    tree = set(source_paths)
    taken = set(selected.values())
    plan: dict[str, str] = {}
    for path, dest in selected.items():
        twin = twin_name(dest)
        if twin is None or not optimization.get(_extension(dest).lstrip("."), True):
            continue
        sibling = twin_name(path)
        if sibling in tree or twin in taken:
            continue
        plan[dest] = twin
    return plan


def minify(dest: str, data: bytes, *, timeout: float = DEFAULT_TIMEOUT) -> Minified:
    """``data`` (the file ``dest``, ``.js`` or ``.css``) minified; :class:`MinifyFailed` if it
    cannot be. The same bytes and the same tool version give the same output."""
    media_type = MEDIA_TYPES.get(_extension(dest))
    if media_type is None:
        raise MinifyFailed(f"{dest}: only .js and .css are minified")
    version = tool_version()
    # GOMAXPROCS=1: one file is one core's work; more processes, not more threads, use more cores.
    try:
        out = run_tool(_CHILD, media_type, data, dest=dest, role="minifier", timeout=timeout, env={"GOMAXPROCS": "1"})
    except ToolFailed as exc:
        raise MinifyFailed(str(exc)) from None
    return Minified(out, TOOL, version)
