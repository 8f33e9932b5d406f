"""The update and download workflows against a registry-shaped server on 127.0.0.1, on both engines."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest

import conveyor
from conveyor import cdn
from conveyor.cdn.pipeline import DOWNLOAD_WORKFLOW, PUBLISH_WORKFLOW, account_of, download_id, publish_id
from conveyor.cdn.store import CdnStore, VersionRow
from conveyor.cdn.tarball import sri
from tests.cdn.conftest import (
    Registry,
    bucket_urls,
    build_tarball,
    ended,
    integrity,
    package_config,
    worker,
    write_config,
)


def versions(cv: conveyor.Conveyor, name: str) -> dict[str, VersionRow]:
    store = CdnStore.open(cv.deployment)
    try:
        return {row.version: row for row in store.versions(account_of(cv), name)}
    finally:
        store.close()


def setup(cv: conveyor.Conveyor, registry: Registry, tmp_path: Path, files: list[str]) -> None:
    cdn.init(cv, registry=registry.url, **bucket_urls(cv))  # type: ignore[arg-type]
    cdn.add(cv, write_config(tmp_path, package_config("widget", files)))


def test_an_update_downloads_new_versions_and_records_their_selected_files(
    cv: conveyor.Conveyor, registry: Registry, tmp_path: Path
) -> None:
    for version in ("1.0.0", "1.1.0", "2.0.0-beta.1"):
        registry.publish(
            "widget",
            version,
            build_tarball(
                {
                    "dist/widget.js": f"var v = '{version}';".encode(),
                    "dist/widget.css": b"a{}",
                    "dist/.hidden.js": b"x",
                    "README.md": b"# widget",
                }
            ),
        )
    setup(cv, registry, tmp_path, ["*.js", "*.css"])
    with worker(cv):
        instance = cdn.update(cv)
        assert ended(cv, cdn.UPDATES_WORKFLOW, instance) == "complete"
        for version in ("1.0.0", "1.1.0", "2.0.0-beta.1"):
            assert ended(cv, DOWNLOAD_WORKFLOW, download_id(account_of(cv), "widget", version)) == "complete"
            assert ended(cv, PUBLISH_WORKFLOW, publish_id(account_of(cv), "widget", version)) == "complete"
        found = versions(cv, "widget")
        assert {v: r.state for v, r in found.items()} == dict.fromkeys(("1.0.0", "1.1.0", "2.0.0-beta.1"), "published")
        assert [f["dest"] for f in found["1.1.0"].files] == ["widget.css", "widget.js"]
        assert found["1.1.0"].skipped == ["dist/.hidden.js: hidden path"]
        assert cv.bucket("cdn-staging").get("files/widget/1.1.0/widget.js").bytes() == b"var v = '1.1.0';"
        assert all(r.published_ms is not None for r in found.values())
        store = CdnStore.open(cv.deployment)
        try:  # fanned out per file, fanned in by a counter: SRIs for .js and .css, of the tarball's bytes
            processed = store.files(account_of(cv), "widget", "1.1.0")
        finally:
            store.close()
        assert [(f.dest, f.size, f.sri) for f in processed if f.source is None] == [
            ("widget.css", 3, sri(b"a{}")),
            ("widget.js", 16, sri(b"var v = '1.1.0';")),
        ]
        assert [(f.dest, f.source) for f in processed if f.source] == [  # the minified twins
            ("widget.min.css", "widget.css"),
            ("widget.min.js", "widget.js"),
        ]

        # Only versions newer than the newest known are taken; ignoreVersions is obeyed.
        registry.publish("widget", "1.0.1", build_tarball({"dist/widget.js": b"old"}))
        registry.publish("widget", "2.0.0", build_tarball({"dist/widget.js": b"new"}))
        registry.publish("widget", "2.0.1", build_tarball({"dist/widget.js": b"bad"}))
        config = package_config("widget", ["*.js"])
        config["autoupdate"]["ignoreVersions"] = ["2.0.1"]
        cdn.add(cv, write_config(tmp_path, config))
        again = cdn.update(cv, package="widget")
        assert ended(cv, cdn.UPDATES_WORKFLOW, again) == "complete"
        assert cv.workflow(cdn.UPDATES_WORKFLOW).get(again).status().output == {
            "started": {"widget": ["2.0.0"]},
            "failed": {},
        }
        assert ended(cv, DOWNLOAD_WORKFLOW, download_id(account_of(cv), "widget", "2.0.0")) == "complete"
        assert sorted(versions(cv, "widget")) == ["1.0.0", "1.1.0", "2.0.0", "2.0.0-beta.1"]


def test_files_of_a_type_the_cdn_does_not_serve_are_skipped_so_a_packaged_gz_takes_no_compressed_key(
    cv: conveyor.Conveyor, registry: Registry, tmp_path: Path
) -> None:
    source = b"var packaged = 1;"
    registry.publish(
        "widget",
        "1.0.0",
        build_tarball({"dist/widget.js": source, "dist/widget.js.gz": b"the package's own gzip", "dist/NOTES": b"n"}),
    )
    setup(cv, registry, tmp_path, ["*"])
    with worker(cv):
        cdn.update(cv)
        assert ended(cv, PUBLISH_WORKFLOW, publish_id(account_of(cv), "widget", "1.0.0")) == "complete"
    row = versions(cv, "widget")["1.0.0"]
    assert [f["dest"] for f in row.files] == ["widget.js"]
    assert row.skipped == [
        "dist/NOTES: not a file type the CDN serves",
        "dist/widget.js.gz: not a file type the CDN serves",
    ]
    # The compressed copy at widget.js.gz is the compressor's, of widget.js.
    assert gzip.decompress(cv.bucket("cdn").get("widget/1.0.0/widget.js.gz").bytes()) == source


def _escaping(archive: tarfile.TarFile) -> None:
    info = tarfile.TarInfo("package/../../etc/evil.js")
    info.size = 4
    archive.addfile(info, io.BytesIO(b"evil"))


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("corrupt", "cannot be read"),
        ("bad integrity", "dist.integrity says"),
        ("escaping entry", "escapes the package's root"),
    ],
)
def test_a_bad_tarball_fails_its_version_with_the_reason_and_records_no_file(
    cv: conveyor.Conveyor, registry: Registry, tmp_path: Path, kind: str, message: str
) -> None:
    good = build_tarball({"dist/widget.js": b"ok"})
    if kind == "corrupt":
        data = good[: len(good) // 2]
        registry.publish("widget", "1.0.0", data)
    elif kind == "bad integrity":
        registry.publish("widget", "1.0.0", good)
        registry.packages["widget"]["1.0.0"]["dist"]["integrity"] = integrity(b"something else")
    else:
        registry.publish("widget", "1.0.0", build_tarball({"dist/widget.js": b"ok"}, extra=_escaping))
    setup(cv, registry, tmp_path, ["*.js"])
    with worker(cv):
        cdn.update(cv)
        assert ended(cv, DOWNLOAD_WORKFLOW, download_id(account_of(cv), "widget", "1.0.0")) == "errored"
    row = versions(cv, "widget")["1.0.0"]
    assert (row.state, row.files, row.published_ms) == ("failed", [], None)
    assert row.error is not None and message in row.error
    assert not list(cv.bucket("cdn-staging").list(prefix="files/"))
    store = CdnStore.open(cv.deployment)
    try:
        assert store.files(account_of(cv), "widget", "1.0.0") == []
    finally:
        store.close()


def test_init_makes_the_buckets_with_a_staging_lifecycle_rule_and_refuses_a_missing_mirror(
    cv: conveyor.Conveyor, registry: Registry
) -> None:
    urls = bucket_urls(cv)
    with pytest.raises(conveyor.BucketNotFound):
        cdn.init(cv, mirror="nowhere", **urls)  # type: ignore[arg-type]
    with pytest.raises(cdn.CdnNotInitialized):
        cdn.status(cv)
    assert [b.name for b in cv.list_buckets()] == []  # nothing made
    settings = cdn.init(cv, registry=registry.url, staging_days=3, **urls)  # type: ignore[arg-type]
    assert (settings.primary_bucket, settings.staging_bucket, settings.mirror_bucket) == ("cdn", "cdn-staging", None)
    assert [r.max_age_seconds for r in cv.bucket("cdn-staging").lifecycle_rules()] == [3 * 86400]
    assert cdn.status(cv)["packages"] == 0


def test_a_package_the_registry_does_not_know_fails_alone(
    cv: conveyor.Conveyor, registry: Registry, tmp_path: Path
) -> None:
    registry.publish("widget", "1.0.0", build_tarball({"dist/widget.js": b"w"}))
    setup(cv, registry, tmp_path, ["*.js"])
    cdn.add(cv, write_config(tmp_path, package_config("ghost", ["*.js"])))
    with worker(cv):
        instance = cdn.update(cv)
        assert ended(cv, cdn.UPDATES_WORKFLOW, instance) == "complete"
        output = cv.workflow(cdn.UPDATES_WORKFLOW).get(instance).status().output
        assert output["started"] == {"widget": ["1.0.0"]}
        assert "package 'ghost': HTTP 404" in output["failed"]["ghost"]
        assert ended(cv, DOWNLOAD_WORKFLOW, download_id(account_of(cv), "widget", "1.0.0")) == "complete"
