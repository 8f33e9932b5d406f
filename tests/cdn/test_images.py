"""The image optimisers on real images: ZopfliPNG for ``.png`` and mozjpeg's jpegtran for ``.jpg`` /
``.jpeg`` (cdnjs's zopflipng and jpegoptim), lossless (every pixel decodes as before, the colour
and metadata chunks kept), deterministic, their versions named; refusals and the time limit."""

from __future__ import annotations

import importlib.metadata
import struct

import pytest

from conveyor.cdn.images import JPEG_TOOL, PNG_TOOL, OptimizeFailed, optimize, optimizes
from tests.cdn.images import animated_png, chunk, chunk_types, jpeg, pixels, png

ALL = {"js": True, "css": True, "png": True, "jpg": True}


def test_only_png_jpg_and_jpeg_are_optimised_and_the_flags_turn_them_off() -> None:
    assert [
        d for d in ("a.png", "b.jpg", "c.jpeg", "d.gif", "e.svg", "f.webp", "g.PNG", "png") if optimizes(d, ALL)
    ] == [
        "a.png",
        "b.jpg",
        "c.jpeg",
    ]
    assert not optimizes("a.png", {**ALL, "png": False}) and optimizes("b.jpg", {**ALL, "png": False})
    assert not optimizes("b.jpg", {**ALL, "jpg": False}) and not optimizes("c.jpeg", {**ALL, "jpg": False})
    assert optimizes("a.png", {})  # every flag is true by default


@pytest.mark.parametrize("color_type", [0, 2, 6], ids=["grey", "rgb", "rgba"])
def test_a_png_gets_smaller_with_every_pixel_kept_and_the_same_bytes_every_time(color_type: int) -> None:
    gamma = chunk(b"gAMA", struct.pack(">I", 45455))
    text = chunk(b"tEXt", b"Comment\x00made by the tests")
    original = png(48, 40, color_type, extra=[gamma, text])
    made = optimize("img/logo.png", original)
    assert made is not None
    assert len(made.data) < len(original)
    assert pixels(made.data) == pixels(original)  # RGBA: transparent pixels keep their colours too
    assert b"gAMA" in chunk_types(made.data) and b"tEXt" not in chunk_types(made.data)
    assert (made.tool, made.tool_version) == (PNG_TOOL, importlib.metadata.version(PNG_TOOL))
    assert optimize("img/logo.png", original) == made
    assert optimize("img/logo.png", made.data) is None  # no smaller a second time: kept as it is


@pytest.mark.parametrize("dest", ["photo.jpg", "photo.jpeg"])
def test_a_jpeg_gets_smaller_with_every_pixel_and_marker_kept(dest: str) -> None:
    original = jpeg(64, 48)
    made = optimize(dest, original)
    assert made is not None
    assert len(made.data) < len(original)
    assert pixels(made.data) == pixels(original)
    assert b"Exif\x00\x00" in made.data and b"made by the tests" in made.data
    assert (made.tool, made.tool_version) == (JPEG_TOOL, importlib.metadata.version(JPEG_TOOL))
    assert optimize(dest, original) == made


@pytest.mark.parametrize(
    ("dest", "data", "reason"),
    [
        ("a.png", b"GIF89a not a png", "not a PNG file"),
        ("a.png", png(16, 16)[:60], "a.png: "),  # cut short
        ("a.jpg", b"\x89PNG\r\n\x1a\n", "not a JPEG file"),
        ("a.jpg", jpeg(32, 32)[:300], "a.jpg: "),
        ("anim.png", animated_png(), "an animated PNG"),  # ZopfliPNG would keep one frame of it
    ],
)
def test_an_image_the_optimiser_cannot_keep_whole_is_refused(dest: str, data: bytes, reason: str) -> None:
    with pytest.raises(OptimizeFailed, match=reason):
        optimize(dest, data)


def test_an_optimiser_past_its_time_limit_is_a_failure_not_a_hang() -> None:
    with pytest.raises(OptimizeFailed, match=r"big\.png: the image optimiser ran out of its 0\.001 s"):
        optimize("big.png", png(256, 256), timeout=0.001)
