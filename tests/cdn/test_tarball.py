"""cdnjs's version rule and the tarball's checks, as pure functions of their inputs."""

from __future__ import annotations

import hashlib
import io
import tarfile

import pytest

from conveyor.cdn import IntegrityMismatch, InvalidTarball
from conveyor.cdn.registry import Dist, new_versions
from conveyor.cdn.tarball import MAX_FILE_BYTES, extract, verify
from tests.cdn.conftest import build_tarball, integrity


def test_a_new_package_takes_its_10_newest_semver_versions_oldest_first() -> None:
    available = [f"1.{minor}.0" for minor in range(15)] + ["not-semver", "1.14.1-rc.1", "1.14.1"]
    chosen = new_versions([], available, frozenset({"1.13.0"}))
    assert chosen == [
        "1.6.0",
        "1.7.0",
        "1.8.0",
        "1.9.0",
        "1.10.0",
        "1.11.0",
        "1.12.0",
        "1.14.0",
        "1.14.1-rc.1",
        "1.14.1",
    ]


def test_a_known_package_takes_only_versions_newer_than_its_newest() -> None:
    available = ["1.0.0", "1.0.1", "1.2.0", "2.0.0-alpha.2", "2.0.0-alpha.10", "2.0.0"]
    assert new_versions(["1.2.0", "1.0.0"], available, frozenset()) == ["2.0.0-alpha.2", "2.0.0-alpha.10", "2.0.0"]
    assert new_versions(["2.0.0"], available, frozenset()) == []


def test_integrity_is_checked_by_sri_and_by_sha1_without_one() -> None:
    data = build_tarball({"a.js": b"a"})
    verify(data, Dist("t", integrity(data), None))
    verify(data, Dist("t", None, hashlib.sha1(data).hexdigest()))
    with pytest.raises(IntegrityMismatch, match=r"dist\.integrity says"):
        verify(data, Dist("t", integrity(b"other"), None))
    with pytest.raises(IntegrityMismatch, match=r"dist\.shasum says"):
        verify(data, Dist("t", None, hashlib.sha1(b"other").hexdigest()))
    with pytest.raises(IntegrityMismatch, match="neither"):
        verify(data, Dist("t", None, None))


def test_extraction_keeps_regular_files_and_skips_hidden_and_oversized_ones() -> None:
    def extra(archive: tarfile.TarFile) -> None:
        link = tarfile.TarInfo("package/dist/link.js")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
        big = tarfile.TarInfo("package/dist/big.js")
        big.size = MAX_FILE_BYTES + 1
        archive.addfile(big, io.BytesIO(bytes(big.size)))

    files, skipped = extract(
        build_tarball({"dist/a.js": b"a", ".npmignore": b"x", "dist/.cache/b.js": b"b"}, extra=extra)
    )
    assert files == {"dist/a.js": b"a"}
    assert skipped == [
        ".npmignore: hidden path",
        "dist/.cache/b.js: hidden path",
        f"dist/big.js: {MAX_FILE_BYTES + 1} bytes, over {MAX_FILE_BYTES}",
    ]


@pytest.mark.parametrize("name", ["/etc/passwd", "package/../../x.js"])
def test_an_entry_escaping_the_root_refuses_the_tarball(name: str) -> None:
    def extra(archive: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.size = 1
        archive.addfile(info, io.BytesIO(b"x"))

    with pytest.raises(InvalidTarball, match="escapes the package's root"):
        extract(build_tarball({"a.js": b"a"}, extra=extra))


def test_a_tarball_that_is_not_gzip_is_refused() -> None:
    with pytest.raises(InvalidTarball, match="cannot be read"):
        extract(b"not a tarball at all")
