"""Lossless image optimisation in place, as cdnjs's step 6 runs zopflipng on ``.png`` and jpegoptim
on ``.jpg`` / ``.jpeg`` files.

>>> optimizes("logo.png", {"png": True, "jpg": True})
True
>>> optimize("logo.png", png_bytes)
Optimized(data=b'\\x89PNG...', tool='zopflipy', tool_version='1.14')

The rules: only the extensions cdnjs optimises (``.png``; ``.jpg`` and ``.jpeg``; lower case, as
its ``path.Ext`` switch), unless the config's ``optimization.png`` / ``.jpg`` is false. The
optimised bytes replace the file (no twin) only when they are smaller; an optimiser that refuses
the file (not an image, corrupt, an animated PNG, the time limit) is logged by the caller and the
original is kept, as cdnjs keeps a file its minifier fails on.

The optimisers, both in the ``cdn`` extra and run in a child process per file
(:mod:`conveyor.cdn.tool_process`), with nothing to install on the system:

- ``.png``: ZopfliPNG (``zopflipy``, the library behind the zopflipng command): the image data
  recompressed with Zopfli, trying several filter strategies, and the colour type reduced where
  no pixel changes. Lossless: cdnjs's ``--lossy_transparent`` (which rewrites the colour of fully
  transparent pixels) is not used, and the chunks that change how pixels are shown (``iCCP``,
  ``sRGB``, ``gAMA``, ``cHRM``) are kept; text and time chunks go, as with cdnjs. An animated PNG
  (``acTL``) is refused: ZopfliPNG keeps only its first frame.
- ``.jpg`` / ``.jpeg``: mozjpeg's jpegtran (``mozjpeg-lossless-optimization``): the same DCT
  coefficients with optimised Huffman tables and progressive scans, so every pixel decodes as
  before; all markers (EXIF, ICC profile, comments) are kept, as jpegoptim keeps them by default.

Both are deterministic: the same bytes and the same tool version give the same output, and the
tool's name and version are recorded with the file.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Mapping

from conveyor.cdn.tool_process import ToolFailed, installed_version, run_tool

PNG_TOOL = "zopflipy"
JPEG_TOOL = "mozjpeg-lossless-optimization"
# extension → (the config's optimization flag, the tool's distribution, the child's argument)
OPTIMIZERS = {".png": ("png", PNG_TOOL), ".jpg": ("jpg", JPEG_TOOL), ".jpeg": ("jpg", JPEG_TOOL)}
# Zopfli is slow by design: seconds for an image of some hundred KB on one core.
DEFAULT_TIMEOUT = 300.0
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
JPEG_START = b"\xff\xd8\xff"

# The child: the image on stdin, the optimised image on stdout; a refusal's reason on stderr (one
# line) with exit status 1. It imports only the optimiser: nothing of Conveyor.
_CHILD = """
import sys
kind = sys.argv[1]
data = sys.stdin.buffer.read()
try:
    if kind == "png":
        if not data.startswith(b"\\x89PNG\\r\\n\\x1a\\n"):
            raise ValueError("not a PNG file")
        at = 8
        while at + 8 <= len(data) and data[at + 4 : at + 8] not in (b"IDAT", b"IEND"):
            if data[at + 4 : at + 8] == b"acTL":
                raise ValueError("an animated PNG: ZopfliPNG would keep only its first frame")
            at += 12 + int.from_bytes(data[at : at + 4], "big")
        import zopfli
        optimizer = zopfli.ZopfliPNG(keep_chunks=["iCCP", "sRGB", "gAMA", "cHRM"])
        out = optimizer.optimize(data)
    else:
        if not data.startswith(b"\\xff\\xd8\\xff"):
            raise ValueError("not a JPEG file")
        import mozjpeg_lossless_optimization as mozjpeg
        out = mozjpeg.optimize(data, copy=mozjpeg.COPY_MARKERS.ALL)
except Exception as exc:
    sys.stderr.write(" ".join(f"{type(exc).__name__}: {exc}".split()))
    sys.exit(1)
sys.stdout.buffer.write(out)
"""


class OptimizeFailed(Exception):
    """The optimiser refused the image or ran out of time; the message says why."""


@dataclasses.dataclass(frozen=True)
class Optimized:
    data: bytes
    tool: str
    tool_version: str


def optimizes(dest: str, optimization: Mapping[str, bool]) -> bool:
    """Whether ``dest`` is optimised in place: a ``.png``, ``.jpg`` or ``.jpeg`` whose type the
    config's ``optimization`` does not turn off."""
    found = OPTIMIZERS.get(posixpath.splitext(dest)[1])
    return found is not None and optimization.get(found[0], True)


def tool_of(dest: str) -> tuple[str, str]:
    """The optimiser of ``dest`` and its installed version (:class:`OptimizeFailed` if it is none's
    or the optimiser is not installed)."""
    found = OPTIMIZERS.get(posixpath.splitext(dest)[1])
    if found is None:
        raise OptimizeFailed(f"{dest}: only .png, .jpg and .jpeg are optimised")
    version = installed_version(found[1])
    if version is None:
        raise OptimizeFailed(f"the image optimiser is not installed: install conveyor[cdn] ({found[1]})")
    return found[1], version


def optimize(dest: str, data: bytes, *, timeout: float = DEFAULT_TIMEOUT) -> Optimized | None:
    """``data`` (the image ``dest``) optimised losslessly, or None when that is not smaller;
    :class:`OptimizeFailed` if the optimiser refuses it."""
    tool, version = tool_of(dest)
    kind = OPTIMIZERS[posixpath.splitext(dest)[1]][0]
    try:
        out = run_tool(_CHILD, kind, data, dest=dest, role="image optimiser", timeout=timeout)
    except ToolFailed as exc:
        raise OptimizeFailed(str(exc)) from None
    _check(dest, kind, data, out)
    if len(out) >= len(data):
        return None
    return Optimized(out, tool, version)


def _check(dest: str, kind: str, data: bytes, out: bytes) -> None:
    """What can be checked without decoding: the output is an image of the same kind and, for a
    PNG, of the same width and height (IHDR's first eight bytes)."""
    if kind == "png":
        same = out.startswith(PNG_SIGNATURE) and out[12:24] == data[12:24] and data[12:16] == b"IHDR"
    else:
        same = out.startswith(JPEG_START) and out.endswith(b"\xff\xd9")
    if not same:
        raise OptimizeFailed(f"{dest}: the image optimiser's output is not the same image")
