"""ProcessingWorkflow's side of the CDN: which files get a minified twin (cdnjs's rules), the real
minifier (deterministic, its version recorded), and the compression service — brotli 11 and gzip 9
next to every output but ``.woff2`` — as a thread of the worker, as a separate ``conveyor cdn
compressor`` process, and SIGKILLed mid-job; on both engines."""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import brotli
import pytest

import conveyor
from conveyor import cdn
from conveyor.cdn.compression import COMPRESSION_QUEUE, COMPRESSOR_METADATA, compress
from conveyor.cdn.images import JPEG_TOOL, PNG_TOOL, optimize
from conveyor.cdn.minify import TOOL, MinifyFailed, minify, plan_minified
from conveyor.cdn.pipeline import DOWNLOAD_WORKFLOW, PUBLISH_WORKFLOW, _Pipeline, account_of, download_id, publish_id
from conveyor.cdn.store import CdnStore, ProcessedFile
from conveyor.cdn.tarball import sri
from tests.cdn import conftest
from tests.cdn.conftest import (
    Registry,
    bucket_urls,
    build_tarball,
    deployment_url,
    package_config,
    worker,
    write_config,
)
from tests.cdn.images import animated_png, jpeg, pixels, png
from tests.cli.support import Cli
from tests.waiting import wait_for

CONVEYOR = Path(sys.executable).with_name("conveyor")
ALL = {"js": True, "css": True, "png": True, "jpg": True}


def test_minified_twins_follow_cdnjs_rules() -> None:
    selected = {
        "dist/app.js": "app.js",  # a twin
        "dist/app.css": "app.css",  # a twin
        "dist/lib.min.js": "lib.min.js",  # already minified
        "dist/has-sibling.js": "has-sibling.js",  # the tarball has dist/has-sibling.min.js
        "dist/clash.js": "clash.js",  # its twin's name is a selected file's
        "other/clash.min.js": "clash.min.js",
        "dist/a.js/b.js": "a.js/b.js",  # the last extension is replaced, not cdnjs's first
        "dist/data.json": "data.json",  # not .js or .css
        "dist/app.mjs": "app.mjs",
    }
    tree = [*selected, "dist/has-sibling.min.js"]
    assert plan_minified(selected, tree, ALL) == {
        "app.js": "app.min.js",
        "app.css": "app.min.css",
        "a.js/b.js": "a.js/b.min.js",
    }
    assert plan_minified(selected, tree, {**ALL, "js": False}) == {"app.css": "app.min.css"}
    assert plan_minified(selected, tree, {**ALL, "css": False}) == {
        "app.js": "app.min.js",
        "a.js/b.js": "a.js/b.min.js",
    }


def test_the_minifier_is_deterministic_and_names_its_version() -> None:
    source = (
        b"function total(items) {\n  var sum = 0; // a comment\n"
        b"  for (var i = 0; i < items.length; i++) { sum += items[i]; }\n  return sum;\n}\n"
    )
    first, second = minify("a.js", source), minify("a.js", source)
    assert first == second
    assert len(first.data) < len(source) and b"comment" not in first.data
    assert (first.tool, first.tool_version) == (TOOL, importlib.metadata.version(TOOL))
    assert minify("a.css", b"a {  color: #ff0000;  }\n").data == b"a{color:red}"
    with pytest.raises(MinifyFailed, match=r"a\.js: .*"):
        minify("a.js", b"function (")
    with pytest.raises(MinifyFailed, match="not UTF-8"):
        minify("a.js", b"var s = '\xff';")


def test_compression_is_brotli_11_and_gzip_9_and_the_same_bytes_every_time() -> None:
    data = b"".join(f"line {i}: {'abc' * (i % 7)}\n".encode() for i in range(2000))
    outputs = compress(data)
    assert outputs == compress(data)
    assert brotli.decompress(outputs[".br"]) == data
    assert gzip.decompress(outputs[".gz"]) == data
    assert outputs[".br"] == brotli.compress(data, quality=11)


def compressor_process(url: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(CONVEYOR), "--url", url, "cdn", "compressor", "--visibility-timeout", "2", "--grace", "1"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def ended(cv: conveyor.Conveyor, version: str) -> str:
    instance = download_id(account_of(cv), "widget", version)
    found: list[str] = []

    def done() -> bool:
        try:
            found[:] = [cv.workflow(DOWNLOAD_WORKFLOW).get(instance).status().status]
        except (conveyor.InstanceNotFound, conveyor.WorkflowNotFound):
            return False
        return found[0] in ("complete", "errored", "terminated")

    wait_for(done, 120, f"widget@{version} to end", poll=0.05)
    return found[0]


def outputs(cv: conveyor.Conveyor, version: str) -> list[ProcessedFile]:
    store = CdnStore.open(cv.deployment)
    try:
        # processed, and then published by the PublishingWorkflow the download starts
        assert store.version(account_of(cv), "widget", version).state in ("processed", "published")  # type: ignore[union-attr]
        return store.files(account_of(cv), "widget", version)
    finally:
        store.close()


def check_staging(cv: conveyor.Conveyor, version: str, files: list[ProcessedFile]) -> None:
    """Each output, its .br and its .gz (not for .woff2) are in staging, once, and decompress to it."""
    staging = cv.bucket("cdn-staging")
    prefix = f"files/widget/{version}/"
    expected = set()
    for f in files:
        data = staging.get(prefix + f.dest).bytes()
        assert (len(data), hashlib.sha512(data).hexdigest()) == (f.size, f.sha512)
        expected.add(prefix + f.dest)
        if not f.dest.endswith(".woff2"):
            assert brotli.decompress(staging.get(prefix + f.dest + ".br").bytes()) == data
            assert gzip.decompress(staging.get(prefix + f.dest + ".gz").bytes()) == data
            expected |= {prefix + f.dest + ".br", prefix + f.dest + ".gz"}
    assert sorted(o.key for o in staging.list(prefix=prefix)) == sorted(expected)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (Linux's /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def publish_widget(registry: Registry, version: str, files: dict[str, bytes]) -> None:
    registry.publish("widget", version, build_tarball(files))


def test_processing_minifies_compresses_and_records_every_output(
    cv: conveyor.Conveyor, registry: Registry, tmp_path: Path
) -> None:
    app_js = b"function greet(name) {\n  return 'hello, ' + name; // say it\n}\nconsole.log(greet('you'));\n"
    files = {
        "dist/app.js": app_js,
        "dist/app.css": b"body {\n  margin: 0px;\n  color: #ff0000;\n}\n",
        "dist/lib.js": b"var lib = 1;\n",
        "dist/lib.min.js": b"var lib=1;",  # a sibling .min: lib.js gets no twin
        "dist/broken.js": b"function (",  # the minifier fails: logged, the original still processed
        "dist/font.woff2": bytes(range(256)) * 4,  # copied raw: no .br, no .gz
        "dist/logo.png": b"\x89PNG\r\n\x1a\n" + bytes(200),
    }
    publish_widget(registry, "1.0.0", files)
    cdn.init(cv, registry=registry.url, **bucket_urls(cv))  # type: ignore[arg-type]
    cdn.add(cv, write_config(tmp_path, package_config("widget", ["*"])))
    with worker(cv):
        cdn.update(cv)
        assert ended(cv, "1.0.0") == "complete"
    found = {f.dest: f for f in outputs(cv, "1.0.0")}
    assert sorted(found) == sorted(
        [
            "app.js",
            "app.min.js",
            "app.css",
            "app.min.css",
            "lib.js",
            "lib.min.js",
            "broken.js",
            "font.woff2",
            "logo.png",
        ]
    )
    version = importlib.metadata.version(TOOL)
    for twin, source in (("app.min.js", "app.js"), ("app.min.css", "app.css")):
        assert (found[twin].source, found[twin].tool, found[twin].tool_version) == (source, TOOL, version)
        assert found[twin].size < found[source].size
    originals = [f for f in found.values() if f.source is None]
    assert all(f.tool is None and f.tool_version is None for f in originals)
    for f in originals:
        assert f.sri == (sri(files[f"dist/{f.dest}"]) if f.dest.endswith((".js", ".css")) else None)
    staged = cv.bucket("cdn-staging").get("files/widget/1.0.0/app.min.js").bytes()
    assert found["app.min.js"].sri == sri(staged) and staged == minify("app.js", app_js).data
    check_staging(cv, "1.0.0", list(found.values()))


def test_optimization_flags_turn_minifying_off(cv: conveyor.Conveyor, registry: Registry, tmp_path: Path) -> None:
    publish_widget(registry, "1.0.0", {"dist/a.js": b"var a = 1;", "dist/a.css": b"a { color: red }"})
    cdn.init(cv, registry=registry.url, **bucket_urls(cv))  # type: ignore[arg-type]
    cdn.add(cv, write_config(tmp_path, package_config("widget", ["*"], optimization={"js": False})))
    with worker(cv):
        cdn.update(cv)
        assert ended(cv, "1.0.0") == "complete"
    assert [f.dest for f in outputs(cv, "1.0.0")] == ["a.css", "a.js", "a.min.css"]


def test_images_are_optimised_in_place_losslessly_with_their_optimiser_recorded(
    cv: conveyor.Conveyor, registry: Registry, tmp_path: Path
) -> None:
    logo, photo = png(64, 48), jpeg(64, 48)
    optimal = optimize("optimal.png", logo)
    assert optimal is not None
    files = {
        "dist/logo.png": logo,
        "dist/img/photo.jpg": photo,
        "dist/img/photo.jpeg": photo,
        "dist/optimal.png": optimal.data,  # optimising it again makes it no smaller: kept as it is
        "dist/broken.png": b"\x89PNG\r\n\x1a\n" + bytes(200),  # refused: logged, kept as it is
        "dist/anim.png": animated_png(),  # refused: ZopfliPNG would drop its frames
        "dist/app.js": b"var answer = 40 + 2;\n",  # minified as before
    }
    publish_widget(registry, "1.0.0", files)
    cdn.init(cv, registry=registry.url, **bucket_urls(cv))  # type: ignore[arg-type]
    cdn.add(cv, write_config(tmp_path, package_config("widget", ["**/*"])))
    with worker(cv):
        cdn.update(cv)
        assert ended(cv, "1.0.0") == "complete"
        assert conftest.ended(cv, PUBLISH_WORKFLOW, publish_id(account_of(cv), "widget", "1.0.0")) == "complete"
    found = {f.dest: f for f in outputs(cv, "1.0.0")}
    assert sorted(found) == sorted([*(path.removeprefix("dist/") for path in files), "app.min.js"])
    staging = cv.bucket("cdn-staging")
    for dest, tool in (("logo.png", PNG_TOOL), ("img/photo.jpg", JPEG_TOOL), ("img/photo.jpeg", JPEG_TOOL)):
        original = files[f"dist/{dest}"]
        staged = staging.get(f"files/widget/1.0.0/{dest}").bytes()
        made = optimize(dest, original)
        assert made is not None and staged == made.data  # what the optimiser makes, every time
        assert len(staged) < len(original) and pixels(staged) == pixels(original)
        assert (found[dest].source, found[dest].tool, found[dest].tool_version) == (
            None,
            tool,
            importlib.metadata.version(tool),
        )
        assert cv.bucket("cdn").get(f"widget/1.0.0/{dest}").bytes() == staged  # published optimised
    for dest in ("optimal.png", "broken.png", "anim.png"):
        assert staging.get(f"files/widget/1.0.0/{dest}").bytes() == files[f"dist/{dest}"]
        assert (found[dest].tool, found[dest].tool_version) == (None, None)
    assert found["app.min.js"].tool == TOOL
    check_staging(cv, "1.0.0", list(found.values()))  # .br and .gz made from the optimised bytes

    # A run of the step after one that replaced the image but crashed before its result was kept:
    # the image is not optimised twice, and the same optimiser is recorded.
    store = CdnStore.open(cv.deployment)
    try:
        pipeline = _Pipeline(cv, store, store.settings(account_of(cv)))
        params = {"name": "widget", "version": "1.0.0", "dest": "logo.png", "optimize": sri(logo)}
        assert pipeline.optimize(params) == {"tool": PNG_TOOL, "tool_version": importlib.metadata.version(PNG_TOOL)}
    finally:
        store.close()
    made = optimize("logo.png", logo)
    assert made is not None and staging.get("files/widget/1.0.0/logo.png").bytes() == made.data


def test_optimization_flags_leave_images_untouched(cv: conveyor.Conveyor, registry: Registry, tmp_path: Path) -> None:
    logo, photo = png(48, 32), jpeg(48, 32)
    cdn.init(cv, registry=registry.url, **bucket_urls(cv))  # type: ignore[arg-type]
    staging = cv.bucket("cdn-staging")
    with worker(cv):
        for version, optimization in (("1.0.0", {"png": False}), ("1.1.0", {"jpg": False})):
            publish_widget(registry, version, {"dist/logo.png": logo, "dist/photo.jpg": photo})
            config = package_config("widget", ["*"], optimization=optimization)
            cdn.add(cv, write_config(tmp_path, config))
            cdn.update(cv, package="widget")
            assert ended(cv, version) == "complete"
    tools = {(version, f.dest): f.tool for version in ("1.0.0", "1.1.0") for f in outputs(cv, version)}
    assert tools == {
        ("1.0.0", "logo.png"): None,
        ("1.0.0", "photo.jpg"): JPEG_TOOL,
        ("1.1.0", "logo.png"): PNG_TOOL,
        ("1.1.0", "photo.jpg"): None,
    }
    assert staging.get("files/widget/1.0.0/logo.png").bytes() == logo  # png: false
    assert staging.get("files/widget/1.1.0/photo.jpg").bytes() == photo  # jpg: false
    assert len(staging.get("files/widget/1.0.0/photo.jpg").bytes()) < len(photo)
    assert len(staging.get("files/widget/1.1.0/logo.png").bytes()) < len(logo)


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_separate_compressor_process_compresses_and_a_sigkilled_one_leaves_no_file_behind(
    engine: str, registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with conveyor.connect(deployment_url(engine, tmp_path, monkeypatch)) as cv:
        sigkilled_compressor(cv, registry, tmp_path)


def sigkilled_compressor(cv: conveyor.Conveyor, registry: Registry, tmp_path: Path) -> None:
    rng = random.Random(3)
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    big = b" ".join(rng.choice(words) for _ in range(500_000))  # some seconds of brotli 11
    files = {"dist/app.js": b"var answer = 40 + 2;\n", "dist/big.map": big, "dist/small.map": b"small"}
    publish_widget(registry, "1.0.0", files)
    cdn.init(cv, registry=registry.url, **bucket_urls(cv))  # type: ignore[arg-type]
    cdn.add(cv, write_config(tmp_path, package_config("widget", ["*"])))
    jobs = cv.queue(COMPRESSION_QUEUE)
    first = compressor_process(cv.url, tmp_path / "compressor.log")
    second: subprocess.Popen[bytes] | None = None
    try:
        with worker(cv, compressor=False):  # the workflows here; every compression in the processes
            cdn.update(cv)
            # Kill the first compressor mid-job: a second of its CPU after its first lease can only be
            # the big file's brotli (some seconds; the other jobs take milliseconds), not yet written.
            wait_for(lambda: jobs.counters().in_flight >= 1, 120, "the first compressor's first job", poll=0.02)
            leased_at = cpu_seconds(first.pid)
            wait_for(
                lambda: cpu_seconds(first.pid) - leased_at >= 1.0,
                120,
                "the first compressor to be compressing the big file",
                poll=0.02,
            )
            assert not any(o.key.endswith("big.map.gz") for o in cv.bucket("cdn-staging").list(prefix="files/"))
            first.kill()
            first.wait()
            second = compressor_process(cv.url, tmp_path / "compressor.log")
            assert ended(cv, "1.0.0") == "complete"
        assert second is not None
        second.terminate()  # SIGTERM: a graceful stop
        assert second.wait(60) == 0
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    found = outputs(cv, "1.0.0")
    assert [f.dest for f in found] == ["app.js", "app.min.js", "big.map", "small.map"]
    check_staging(cv, "1.0.0", found)
    assert jobs.metrics().backlog_count == 0
    assert jobs.counters().sent == 4  # one job per output, none sent twice
    big_gz = cv.bucket("cdn-staging").head("files/widget/1.0.0/big.map.gz")
    assert big_gz.metadata[COMPRESSOR_METADATA].endswith(f":{second.pid}")  # redone by the second


def test_a_minifier_past_its_time_limit_is_a_failure_not_a_hang() -> None:
    with pytest.raises(MinifyFailed, match=r"big\.js: the minifier ran out of its 0\.001 s"):
        minify("big.js", b"var a = 1;\n" * 100_000, timeout=0.001)


def test_a_malformed_compression_job_is_dropped_and_a_foreign_gz_wakes_nobody(
    cv: conveyor.Conveyor, registry: Registry
) -> None:
    cdn.init(cv, registry=registry.url, **bucket_urls(cv))  # type: ignore[arg-type]
    staging = cv.bucket("cdn-staging")
    staging.put("files/widget/1.0.0/own.js.gz", b"a package's own .gz file")  # no instance in its metadata
    jobs = cv.queue(COMPRESSION_QUEUE)
    for body in ({"key": "../../etc/passwd", "instance": "x"}, {"key": "files/a.js"}, "files/a.js"):
        jobs.send(body)
    with worker(cv):
        wait_for(lambda: jobs.counters().acked == 3, 60, "the three jobs to be settled", poll=0.05)
        wait_for(lambda: cv.queue("cdn-compressed").counters().acked >= 1, 60, "the .gz notification", poll=0.05)
    assert [o.key for o in staging.list()] == ["files/widget/1.0.0/own.js.gz"]
    assert jobs.counters().dead_lettered == 0


def test_the_compressor_command_refuses_a_bad_visibility_timeout(tmp_path: Path) -> None:
    result = Cli(f"sqlite://{tmp_path / 'data'}")("cdn", "compressor", "--visibility-timeout", "0")
    assert result.exit_code == 2
    assert "--visibility-timeout" in result.output


def test_a_version_1_cdn_db_gains_the_twin_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    directory = tmp_path / "data"
    with conveyor.connect(f"sqlite://{directory}"):
        pass
    with sqlite3.connect(directory / "cdn.db") as db:  # cdn_files as version 1 made it
        db.executescript(
            "PRAGMA application_id = 1131376246; PRAGMA user_version = 1;"
            "CREATE TABLE cdn_files (account TEXT NOT NULL, name TEXT NOT NULL, version TEXT NOT NULL,"
            " dest TEXT NOT NULL, size BIGINT NOT NULL, sha512 TEXT NOT NULL, sri TEXT,"
            " processed_ms BIGINT NOT NULL, PRIMARY KEY (account, name, version, dest));"
            "INSERT INTO cdn_files VALUES ('local', 'w', '1.0.0', 'a.js', 1, 'ab', 'sha512-x', 5);"
        )
    with conveyor.connect(f"sqlite://{directory}") as cv:
        store = CdnStore.open(cv.deployment)
        try:
            twin = ProcessedFile("a.min.js", 1, "cd", "sha512-y", "a.js", TOOL, "1.2.3")
            store.record_outputs("local", "w", "1.0.0", [twin], now_ms=6)
            assert store.files("local", "w", "1.0.0") == [ProcessedFile("a.js", 1, "ab", "sha512-x"), twin]
        finally:
            store.close()
