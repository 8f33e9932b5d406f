"""A version's tarball as pure functions of its bytes: verify it against the registry's hashes,
extract its files safely.

>>> verify(data, Dist(url, integrity="sha512-...", shasum=None))
>>> files, skipped = extract(data)        # {"dist/jquery.js": b"..."}, ["big.bin: over 25 MiB", ...]
"""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
import zlib
from pathlib import PurePosixPath

from conveyor.cdn.errors import IntegrityMismatch, InvalidTarball
from conveyor.cdn.registry import Dist

MAX_FILE_BYTES = 26_214_400  # cdnjs's util.MaxFileSize: 25 MiB
_ALGORITHMS = {"sha512": hashlib.sha512, "sha384": hashlib.sha384, "sha256": hashlib.sha256}


def sri(data: bytes) -> str:
    """``sha512-`` and the base64 of the SHA-512 of ``data`` (cdnjs's and npm's form)."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def verify(data: bytes, dist: Dist) -> None:
    """Refuse ``data`` (``IntegrityMismatch``) unless it matches ``dist.integrity`` (the strongest
    of its SRI hashes) or, without one, ``dist.shasum`` (sha1); with neither, refuse too: an
    unverifiable tarball is not published."""
    if dist.integrity:
        candidates = []
        for token in dist.integrity.split():
            algorithm, _, digest = token.partition("-")
            if algorithm in _ALGORITHMS and digest:
                candidates.append((list(_ALGORITHMS).index(algorithm), algorithm, digest.split("?")[0]))
        if not candidates:
            raise IntegrityMismatch(f"dist.integrity {dist.integrity!r} has no sha512, sha384 or sha256 hash")
        _, algorithm, expected = min(candidates)
        actual = base64.b64encode(_ALGORITHMS[algorithm](data).digest()).decode()
        if actual != expected:
            raise IntegrityMismatch(f"tarball {dist.tarball}: {algorithm} is {actual}, dist.integrity says {expected}")
        return
    if dist.shasum:
        actual = hashlib.sha1(data, usedforsecurity=False).hexdigest()
        if actual != dist.shasum.lower():
            raise IntegrityMismatch(f"tarball {dist.tarball}: sha1 is {actual}, dist.shasum says {dist.shasum}")
        return
    raise IntegrityMismatch(f"tarball {dist.tarball}: the registry gives neither dist.integrity nor dist.shasum")


def _hidden(path: str) -> bool:
    return path.startswith(".") or "/." in path


def extract(data: bytes) -> tuple[dict[str, bytes], list[str]]:
    """The regular files of a gzip'd npm tarball, ``package/`` (its first directory) stripped:
    ``({path: bytes}, [why each skipped file was skipped])``. Hidden paths and files over 25 MiB
    are skipped; an entry whose path escapes the root (absolute, ``..``) refuses the whole tarball
    (``InvalidTarball``), as does anything unreadable."""
    files: dict[str, bytes] = {}
    skipped: list[str] = []
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            for member in archive:
                name = member.name
                parts = PurePosixPath(name).parts
                if name.startswith("/") or ".." in parts or "\\" in name:
                    raise InvalidTarball(f"tarball entry {name!r} escapes the package's root")
                if not member.isreg():
                    continue  # directories, links, devices: only regular files are kept
                relative = "/".join(parts[1:])  # npm's "package/", or whatever its first directory is
                if not relative:
                    continue
                if _hidden(relative):
                    skipped.append(f"{relative}: hidden path")
                    continue
                if member.size > MAX_FILE_BYTES:
                    skipped.append(f"{relative}: {member.size} bytes, over {MAX_FILE_BYTES}")
                    continue
                reader = archive.extractfile(member)
                if reader is None:
                    continue
                files[relative] = reader.read()
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise InvalidTarball(f"the tarball cannot be read: {exc}") from None
    return files, skipped
