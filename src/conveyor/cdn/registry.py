"""npm's registry HTTP API, as the update check needs it, and cdnjs's rule of which versions to take.

>>> client = RegistryClient("https://registry.npmjs.org")
>>> dists = client.versions("jquery")            # {"3.7.1": Dist(tarball, integrity, shasum), ...}
>>> new_versions(known=["3.7.0"], available=dists, ignore=frozenset())
['3.7.1']
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from urllib.parse import quote

import httpx
import orjson

from conveyor.cdn.errors import RegistryError, UnknownPackage

NEW_PACKAGE_VERSIONS = 10  # cdnjs imports the 10 newest versions of a package it has not seen
MAX_TARBALL_BYTES = 512 * 1024 * 1024
TIMEOUT = httpx.Timeout(30.0, connect=5.0)

_SEMVER = re.compile(
    r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*)?$"
)


@dataclasses.dataclass(frozen=True)
class Dist:
    """A version's ``dist``: where its tarball is and the hashes it must match."""

    tarball: str
    integrity: str | None
    shasum: str | None


SemverKey = tuple[int, int, int, int, tuple[tuple[int, int | str], ...]]


def semver_key(version: str) -> SemverKey | None:
    """A sort key giving semver's precedence (a release after its pre-releases), or None when
    ``version`` is not semver."""
    found = _SEMVER.match(version)
    if found is None:
        return None
    major, minor, patch, pre = found.groups()
    identifiers = tuple((0, int(p)) if p.isdigit() else (1, p) for p in pre.split(".")) if pre else ()
    return (int(major), int(minor), int(patch), 0 if pre else 1, identifiers)


def new_versions(known: Iterable[str], available: Iterable[str], ignore: frozenset[str]) -> list[str]:
    """cdnjs's rule: of the semver ``available`` versions not in ``ignore``, those newer than the
    newest ``known`` one, or the 10 newest for a package with none known; oldest first."""
    keyed = sorted(
        ((key, v) for v in available if v not in ignore and (key := semver_key(v)) is not None),
        key=lambda kv: kv[0],
    )
    known_keys = [k for v in known if (k := semver_key(v)) is not None]
    if not known_keys:
        return [v for _, v in keyed[-NEW_PACKAGE_VERSIONS:]]
    newest = max(known_keys)
    return [v for key, v in keyed if key > newest]


class RegistryClient:
    """Reads packuments and tarballs from an npm registry at ``base_url``."""

    def __init__(self, base_url: str, *, client: httpx.Client | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = client or httpx.Client(timeout=TIMEOUT, follow_redirects=True)

    def close(self) -> None:
        self._client.close()

    def versions(self, name: str) -> dict[str, Dist]:
        """Every version of package ``name`` with its ``dist``; ``RegistryError`` naming the package
        when the registry fails or answers with something that is not a packument."""
        url = f"{self.base_url}/{quote(name, safe='@')}"
        try:
            response = self._client.get(url, headers={"Accept": "application/json"})
        except httpx.HTTPError as exc:
            raise RegistryError(f"registry {self.base_url}: cannot read package {name!r}: {exc}") from None
        if response.status_code == 404:
            raise UnknownPackage(f"registry {self.base_url}: package {name!r}: HTTP 404, no such package")
        if response.status_code != 200:
            raise RegistryError(f"registry {self.base_url}: package {name!r}: HTTP {response.status_code}")
        try:
            document = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            raise RegistryError(f"registry {self.base_url}: package {name!r}: the answer is not JSON") from None
        versions = document.get("versions") if isinstance(document, dict) else None
        if not isinstance(versions, Mapping):
            raise RegistryError(f"registry {self.base_url}: package {name!r}: the answer has no 'versions'")
        found: dict[str, Dist] = {}
        for version, manifest in versions.items():
            dist = manifest.get("dist") if isinstance(manifest, dict) else None
            if not isinstance(dist, dict) or not isinstance(dist.get("tarball"), str):
                continue  # a version without a tarball cannot be published; the others still can
            integrity, shasum = dist.get("integrity"), dist.get("shasum")
            found[str(version)] = Dist(
                dist["tarball"],
                integrity if isinstance(integrity, str) else None,
                shasum if isinstance(shasum, str) else None,
            )
        return found

    def fetch(self, url: str) -> bytes:
        """The bytes at ``url`` (a tarball), at most 512 MiB."""
        try:
            with self._client.stream("GET", url) as response:
                if response.status_code != 200:
                    raise RegistryError(f"tarball {url}: HTTP {response.status_code}")
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > MAX_TARBALL_BYTES:
                        raise RegistryError(f"tarball {url}: larger than {MAX_TARBALL_BYTES} bytes")
                    chunks.append(chunk)
                return b"".join(chunks)
        except httpx.HTTPError as exc:
            raise RegistryError(f"tarball {url}: {exc}") from None
