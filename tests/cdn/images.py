"""Real images for the optimiser's tests: PNGs written byte by byte (zlib and struct, stored with
little compression, as a package's unoptimised images often are) and JPEGs encoded by Pillow with
plain Huffman tables; and their decoded pixels, to check that optimising changed none."""

from __future__ import annotations

import io
import struct
import zlib

from PIL import Image

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 6: 4}  # PNG colour type → samples per pixel (grey, RGB, RGBA)


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(width: int, height: int, color_type: int = 6, *, extra: list[bytes] | None = None, level: int = 1) -> bytes:
    """A ``width`` × ``height`` 8-bit PNG of gradients (grey, RGB or RGBA by ``color_type``; in RGBA
    every seventh pixel is fully transparent but keeps a colour of its own), ``extra`` chunks before
    its image data, compressed at zlib ``level`` with no row filter."""
    channels = CHANNELS[color_type]
    rows = []
    for y in range(height):
        row = bytearray([0])  # filter type 0 (None)
        for x in range(width):
            sample = [(x * 7 + y) % 256, (y * 5) % 256, (x * y) % 256, 0 if (x + y * width) % 7 == 0 else 255]
            row += bytes(sample[:channels])
        rows.append(bytes(row))
    header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    return (
        PNG_SIGNATURE
        + chunk(b"IHDR", header)
        + b"".join(extra or [])
        + chunk(b"IDAT", zlib.compress(b"".join(rows), level))
        + chunk(b"IEND", b"")
    )


def animated_png() -> bytes:
    frames = [Image.new("RGBA", (24, 24), (60 * i, 20, 200, 255)) for i in range(3)]
    out = io.BytesIO()
    frames[0].save(out, "PNG", save_all=True, append_images=frames[1:], duration=100, loop=0)
    return out.getvalue()


def jpeg(width: int, height: int, *, comment: bytes = b"made by the tests") -> bytes:
    """A baseline JPEG (quality 90, Huffman tables not optimised) with an EXIF block and a comment."""
    image = Image.new("RGB", (width, height))
    image.putdata([((x * 3) % 256, (y * 2) % 256, (x ^ y) % 256) for y in range(height) for x in range(width)])
    exif = Image.Exif()
    exif[0x010E] = "a test image"  # ImageDescription
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90, optimize=False, exif=exif.tobytes(), comment=comment)
    return out.getvalue()


def pixels(data: bytes) -> tuple[tuple[int, int], bytes]:
    """The image's size and its pixels as 8-bit RGBA (lossless for 8-bit PNGs and for JPEGs)."""
    with Image.open(io.BytesIO(data)) as image:
        return image.size, image.convert("RGBA").tobytes()


def chunk_types(data: bytes) -> list[bytes]:
    found, at = [], len(PNG_SIGNATURE)
    while at + 8 <= len(data):
        found.append(data[at + 4 : at + 8])
        at += 12 + struct.unpack(">I", data[at : at + 4])[0]
    return found
