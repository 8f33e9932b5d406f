"""PublishingWorkflow on both engines: a processed version's files and their .br/.gz in the primary
bucket and a mirror on moto_server, its metadata in KV, its package in the search index; a version
visible only once all of it is published; a published file never rewritten; a version without its
compressed copies refused."""

from __future__ import annotations

import gzip
import hashlib
import logging
import threading
from pathlib import Path

import brotli
import httpx
import pytest

import conveyor
from conveyor import cdn
from conveyor.cdn.metadata import METADATA_NAMESPACE, Catalog
from conveyor.cdn.pipeline import DOWNLOAD_WORKFLOW, PUBLISH_WORKFLOW, account_of, download_id, file_key, publish_id
from conveyor.cdn.registry import Dist
from conveyor.cdn.store import CdnStore, ProcessedFile
from conveyor.cdn.tarball import sri
from tests.cdn.conftest import (
    Registry,
    bucket_urls,
    build_tarball,
    cdn_server,
    ended,
    package_config,
    s3_bucket,
    worker,
    write_config,
)
from tests.storage.s3_server import S3Server

NO_MINIFY = {"js": False, "css": False}
WIDGET_JS = b"function widget() { return 1; }\n" * 40
WIDGET_CSS = b".widget { color: red; }\n" * 20


def widget_tarball(version: str, extra: dict[str, bytes] | None = None) -> bytes:
    return build_tarball(
        {
            "dist/widget.js": WIDGET_JS + version.encode(),
            "dist/widget.css": WIDGET_CSS,
            "dist/font.woff2": b"wOF2 not really a font",
            **(extra or {}),
        }
    )


def publish_versions(cv: conveyor.Conveyor, versions: list[str]) -> None:
    account = account_of(cv)
    for version in versions:
        assert ended(cv, DOWNLOAD_WORKFLOW, download_id(account, "widget", version)) == "complete"
        assert ended(cv, PUBLISH_WORKFLOW, publish_id(account, "widget", version)) == "complete"


def test_a_version_is_published_to_the_primary_and_the_mirror_with_its_metadata_and_search_entry(
    cv: conveyor.Conveyor, registry: Registry, s3_server: S3Server, tmp_path: Path
) -> None:
    versions = ["1.0.0", "1.1.0", "2.0.0-beta.1"]
    for version in versions:
        registry.publish("widget", version, widget_tarball(version))
    mirror = s3_bucket(cv, s3_server, "cdn-mirror")
    cdn.init(cv, registry=registry.url, mirror="cdn-mirror", **bucket_urls(cv))  # type: ignore[arg-type]
    # Minified twins are processing's subject (test_processing.py); off here, so the lists below are
    # of the tarball's files.
    config = package_config(
        "widget", ["*.js", "*.css", "*.woff2"], filename="widget.min.js", license="MIT", optimization=NO_MINIFY
    )
    cdn.add(cv, write_config(tmp_path, config))
    with worker(cv):
        cdn.update(cv)
        publish_versions(cv, versions)
    primary = cv.bucket("cdn")
    for bucket in (primary, mirror):
        keys = sorted(o.key for o in bucket.list(prefix="widget/1.1.0/"))
        assert keys == [
            "widget/1.1.0/font.woff2",  # stored as it is: no .br/.gz
            "widget/1.1.0/widget.css",
            "widget/1.1.0/widget.css.br",
            "widget/1.1.0/widget.css.gz",
            "widget/1.1.0/widget.js",
            "widget/1.1.0/widget.js.br",
            "widget/1.1.0/widget.js.gz",
        ]
        original = WIDGET_JS + b"1.1.0"
        assert bucket.get("widget/1.1.0/widget.js").bytes() == original
        assert brotli.decompress(bucket.get("widget/1.1.0/widget.js.br").bytes()) == original
        assert gzip.decompress(bucket.get("widget/1.1.0/widget.js.gz").bytes()) == original
    catalog = Catalog(cv.kv(METADATA_NAMESPACE))
    assert catalog.versions("widget") == ["2.0.0-beta.1", "1.1.0", "1.0.0"]
    assert catalog.files("widget", "1.1.0") == ["font.woff2", "widget.css", "widget.js"]
    assert catalog.sris("widget", "1.1.0") == {
        "widget/1.1.0/widget.css": sri(WIDGET_CSS),
        "widget/1.1.0/widget.js": sri(WIDGET_JS + b"1.1.0"),
    }
    objects = catalog.objects("widget", "1.1.0")
    assert sorted(objects) == [
        "font.woff2",
        "widget.css",
        "widget.css.br",
        "widget.css.gz",
        *sorted(["widget.js", "widget.js.br", "widget.js.gz"]),
    ]
    assert catalog.package("widget") == {
        "name": "widget",
        "description": "widget for tests",
        "keywords": ["test"],
        "version": "1.1.0",  # the newest stable semver, not the beta
        "filename": "widget.js",  # the configured widget.min.js is not there: the closest file
        "license": "MIT",
        "repository": {"type": "git", "url": "https://example.com/widget.git"},
        "autoupdate": {"source": "npm", "target": "widget"},
    }
    store = CdnStore.open(cv.deployment)
    try:
        assert {r.version: r.state for r in store.versions(account_of(cv), "widget")} == dict.fromkeys(
            versions, "published"
        )
        assert store.search(account_of(cv), "wid") == ["widget"]
        assert store.search(account_of(cv), "widget tests") == ["widget"]  # description words
        assert store.search(account_of(cv), "widget nothing") == []
        assert store.search(account_of(cv), "wid", frozenset({"description"})) == ["widget"]
        assert store.search(account_of(cv), "example", frozenset({"name"})) == []
    finally:
        store.close()


def test_a_reader_polling_while_a_version_publishes_sees_all_of_it_or_none(
    cv: conveyor.Conveyor, registry: Registry, tmp_path: Path
) -> None:
    parts = {f"dist/part{i:03}.js": f"var part{i} = {i};".encode() for i in range(120)}
    registry.publish("widget", "1.0.0", widget_tarball("1.0.0", parts))
    cdn.init(cv, registry=registry.url, **bucket_urls(cv))  # type: ignore[arg-type]
    cdn.add(cv, write_config(tmp_path, package_config("widget", ["*.js", "*.css"], optimization=NO_MINIFY)))
    expected = sorted(["widget.css", "widget.js", *(p.removeprefix("dist/") for p in parts)])
    seen: list[tuple[bool, int, int, int]] = []  # (in the bucket, file status, API status, files listed)
    stop = threading.Event()
    with cdn_server(cv) as server, worker(cv):

        def poll() -> None:
            primary = cv.bucket("cdn")
            with httpx.Client(base_url=server.url) as client:
                while not stop.is_set():
                    copied = primary.exists("widget/1.0.0/part000.js")
                    file = client.get("/ajax/libs/widget/1.0.0/part000.js").status_code
                    answer = client.get("/libraries/widget/1.0.0")
                    listed = len(answer.json().get("rawFiles", [])) if answer.status_code == 200 else 0
                    seen.append((copied, file, answer.status_code, listed))

        reader = threading.Thread(target=poll)
        reader.start()
        try:
            cdn.update(cv)
            publish_versions(cv, ["1.0.0"])
            with httpx.Client(base_url=server.url) as client:  # and one poll after it
                assert client.get("/libraries/widget/1.0.0").json()["rawFiles"] == expected
        finally:
            stop.set()
            reader.join()
    assert seen, "the reader never polled"
    for copied, file, api_status, listed in seen:
        assert api_status in (200, 404)
        assert file in (200, 404)
        if api_status == 200:  # a version shown is shown whole
            assert listed == len(expected)
        if file == 200:
            assert copied
    visible = [i for i, (_, _, status, _) in enumerate(seen) if status == 200]
    if visible:  # once shown, never hidden again
        assert all(status == 200 for _, _, status, _ in seen[visible[0] :])


def test_a_processed_version_without_compressed_copies_is_refused_and_nothing_is_published(
    cv: conveyor.Conveyor, tmp_path: Path
) -> None:
    # A version recorded processed whose .br/.gz are not in staging (as if the compressor had not
    # run, or the staging bucket's lifecycle rule had removed them before a re-publish).
    cdn.init(cv, **bucket_urls(cv))  # type: ignore[arg-type]
    cdn.add(cv, write_config(tmp_path, package_config("widget", ["*.js", "*.css"])))
    account, staging = account_of(cv), cv.bucket("cdn-staging")
    store = CdnStore.open(cv.deployment)
    try:
        store.queue_version(account, "widget", "1.0.0", Dist("http://unused/w.tgz", sri(b"x"), None), now_ms=1)
        outputs, records = [], []
        for dest, data in (("widget.css", WIDGET_CSS), ("widget.js", WIDGET_JS)):
            staging.put(file_key("widget", "1.0.0", dest), data)
            outputs.append(ProcessedFile(dest, len(data), hashlib.sha512(data).hexdigest(), sri(data)))
            records.append({"path": f"dist/{dest}", "dest": dest, "size": len(data), "sha512": sri(data)})
        store.record_files(account, "widget", "1.0.0", records, [], now_ms=2)
        store.record_outputs(account, "widget", "1.0.0", outputs, now_ms=2)
        store.mark_processed(account, "widget", "1.0.0", now_ms=3)
        with worker(cv):
            assert ended(cv, PUBLISH_WORKFLOW, cdn.publish(cv, "widget", "1.0.0")) == "errored"
        row = store.version(account, "widget", "1.0.0")
    finally:
        store.close()
    assert row is not None and row.state == "failed" and row.published_ms is None
    assert row.error is not None and "4 compressed copies are missing" in row.error
    assert "files/widget/1.0.0/widget.css.br" in row.error
    assert list(cv.bucket("cdn").list()) == []
    assert list(cv.kv(METADATA_NAMESPACE, create=True).list()) == []


def test_a_republish_that_would_change_a_published_file_is_refused_logged_and_writes_nothing(
    cv: conveyor.Conveyor, registry: Registry, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    registry.publish("widget", "1.0.0", widget_tarball("1.0.0"))
    cdn.init(cv, registry=registry.url, **bucket_urls(cv))  # type: ignore[arg-type]
    cdn.add(cv, write_config(tmp_path, package_config("widget", ["*.js"])))
    with worker(cv):
        cdn.update(cv)
        publish_versions(cv, ["1.0.0"])
        published = cv.bucket("cdn").get("widget/1.0.0/widget.js.br").bytes()
        again = cdn.publish(cv, "widget", "1.0.0")  # the same bytes: nothing to do
        assert ended(cv, PUBLISH_WORKFLOW, again) == "complete"
        # A compressor of another version makes other (equally valid) bytes: they must not replace
        # what clients pinned.
        other = brotli.compress(WIDGET_JS + b"1.0.0", quality=4)
        assert other != published
        cv.bucket("cdn-staging").put("files/widget/1.0.0/widget.js.br", other)
        with caplog.at_level(logging.ERROR, logger="conveyor.cdn"):
            refused = cdn.publish(cv, "widget", "1.0.0")
            assert ended(cv, PUBLISH_WORKFLOW, refused) == "errored"
        status = cv.workflow(PUBLISH_WORKFLOW).get(refused).status()
    assert "is published with other bytes" in str(status.error)
    assert any("a published file never changes" in r.getMessage() for r in caplog.records)
    assert cv.bucket("cdn").get("widget/1.0.0/widget.js.br").bytes() == published
    store = CdnStore.open(cv.deployment)
    try:
        row = store.version(account_of(cv), "widget", "1.0.0")
    finally:
        store.close()
    assert row is not None and row.state == "published"
    assert Catalog(cv.kv(METADATA_NAMESPACE)).versions("widget") == ["1.0.0"]
