"""Vendor the dashboard's front-end libraries into the package, from the npm registry, pinned.

Run it to change a version (then commit the files it wrote): the package ships these files, so the
dashboard loads nothing from the internet and users need no build step. Each tarball is checked
against the registry's ``dist.integrity`` (SHA-512) before anything is written.

    python scripts/vendor_dash.py
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
import urllib.request
from pathlib import Path

REGISTRY = "https://registry.npmjs.org"
TARGET = Path(__file__).resolve().parents[1] / "src" / "conveyor" / "server" / "dash" / "static" / "vendor"
# package -> (version, {file in the tarball: name written under TARGET})
PACKAGES = {
    "htmx.org": ("2.0.4", {"package/dist/htmx.min.js": "htmx.min.js", "package/LICENSE": "htmx.LICENSE"}),
    "uplot": (
        "1.6.31",
        {
            "package/dist/uPlot.iife.min.js": "uPlot.iife.min.js",
            "package/dist/uPlot.min.css": "uPlot.min.css",
            "package/LICENSE": "uPlot.LICENSE",
        },
    ),
}


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 - a fixed https registry URL
        return bytes(response.read())


def vendor(name: str, version: str, files: dict[str, str]) -> None:
    meta = json.loads(fetch(f"{REGISTRY}/{name}/{version}"))
    tarball = fetch(meta["dist"]["tarball"])
    algorithm, _, expected = meta["dist"]["integrity"].partition("-")
    if algorithm != "sha512" or base64.b64encode(hashlib.sha512(tarball).digest()).decode() != expected:
        raise SystemExit(f"{name}@{version}: the tarball does not match the registry's integrity")
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
        for member, written in files.items():
            extracted = archive.extractfile(member)
            if extracted is None:
                raise SystemExit(f"{name}@{version} has no file {member}")
            (TARGET / written).write_bytes(extracted.read())
            print(f"{name}@{version} {member} -> {TARGET / written}")


def main() -> None:
    TARGET.mkdir(parents=True, exist_ok=True)
    versions = {}
    for name, (version, files) in PACKAGES.items():
        vendor(name, version, files)
        versions[name] = version
    (TARGET / "VERSIONS.json").write_text(json.dumps(versions, indent=2) + "\n")


if __name__ == "__main__":
    main()
