"""``cdn serve`` on 127.0.0.1: files with cdnjs's headers in each encoding (decompressing to the
published bytes), its 403/404 rules, the libraries API field for field in api.cdnjs.com's shapes,
and the mirror answering, with no 5xx, once the primary bucket's S3 server is stopped or hangs."""

from __future__ import annotations

import gzip
import os
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import brotli
import httpx
import orjson
import pytest

import conveyor
from conveyor import cdn
from conveyor.cdn.importer import import_tree
from conveyor.cdn.pipeline import PUBLISH_WORKFLOW, account_of, publish_id
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
from tests.storage.s3_server import S3Server, start_s3_server

SCRIPT = b"/*! widget */ function widget(a, b) { return a + b; }\n" * 50
STYLE = b".widget { margin: 0 auto; }\n" * 30
FONT = b"wOF2-bytes-as-stored"
VERSIONS = ["1.0.0", "1.1.0", "2.0.0-rc.1"]


def script(version: str) -> bytes:
    return SCRIPT + version.encode()


def fetch(client: httpx.Client, path: str, encoding: str, **headers: str) -> tuple[httpx.Response, bytes]:
    """The answer and its body as sent (httpx would decode a br or gzip body)."""
    with client.stream("GET", path, headers={"Accept-Encoding": encoding, **headers}) as response:
        return response, b"".join(response.iter_raw())


DECODE = {"br": brotli.decompress, "gzip": gzip.decompress, "identity": lambda data: data}


def published_widget(cv: conveyor.Conveyor, registry: Registry, tmp_path: Path, **init: Any) -> None:
    for version in VERSIONS:
        registry.publish(
            "widget",
            version,
            build_tarball({"dist/widget.js": script(version), "dist/widget.css": STYLE, "dist/fonts/w.woff2": FONT}),
        )
    cdn.init(cv, registry=registry.url, **{**bucket_urls(cv), **init})
    config = package_config(
        "widget",
        ["*.js", "*.css", "fonts/*.woff2"],
        filename="widget.js",
        homepage="https://example.com/widget",
        license="MIT",
        authors=[{"name": "Ada"}, {"name": "Grace", "url": "https://example.com"}],
        optimization={"js": False, "css": False},  # the files below are the tarball's (no .min twins)
    )
    cdn.add(cv, write_config(tmp_path, config))
    with worker(cv):
        cdn.update(cv)
        for version in VERSIONS:
            assert ended(cv, PUBLISH_WORKFLOW, publish_id(account_of(cv), "widget", version)) == "complete"


def test_files_are_served_in_each_encoding_with_cdnjs_headers(
    cv: conveyor.Conveyor, registry: Registry, tmp_path: Path
) -> None:
    published_widget(cv, registry, tmp_path)
    with cdn_server(cv) as server, httpx.Client(base_url=server.url) as client:
        path = "/ajax/libs/widget/1.1.0/widget.js"
        br, body = fetch(client, path, "gzip, deflate, br")
        assert (br.status_code, br.headers["content-encoding"]) == (200, "br")
        assert brotli.decompress(body) == script("1.1.0")
        gz, body = fetch(client, path, "gzip")
        assert (gz.status_code, gz.headers["content-encoding"]) == (200, "gzip")
        assert gzip.decompress(body) == script("1.1.0")
        plain, body = fetch(client, path, "identity")  # neither: the stored original, as published
        assert "content-encoding" not in plain.headers
        assert body == script("1.1.0")
        for response in (br, gz, plain):
            headers = response.headers
            assert headers["cache-control"] == "public, max-age=30672000, immutable"
            assert headers["content-type"] == "application/javascript; charset=utf-8"
            assert headers["access-control-allow-origin"] == "*"
            assert headers["cross-origin-resource-policy"] == "cross-origin"
            assert headers["timing-allow-origin"] == "*"
            assert headers["x-content-type-options"] == "nosniff"
            assert headers["vary"] == "Accept-Encoding"
            assert headers["etag"].startswith('"') and "last-modified" in headers
        assert len({br.headers["etag"], gz.headers["etag"], plain.headers["etag"]}) == 3
        again, body = fetch(client, path, "br", **{"If-None-Match": br.headers["etag"]})
        assert (again.status_code, body) == (304, b"")
        head = client.head(path, headers={"Accept-Encoding": "br"})
        assert (head.status_code, head.content, head.headers["content-length"]) == (
            200,
            b"",
            br.headers["content-length"],
        )

        css = client.get("/ajax/libs/widget/1.1.0/widget.css", headers={"Accept-Encoding": "identity"})
        assert (css.content, css.headers["content-type"]) == (STYLE, "text/css; charset=utf-8")
        font, body = fetch(client, "/ajax/libs/widget/1.1.0/fonts/w.woff2", "br")
        assert (body, "content-encoding" in font.headers) == (FONT, False)  # .woff2 as stored

        assert client.get("/ajax/libs/widget/1.1.0/widget.exe").status_code == 403  # not in the whitelist
        assert client.get("/ajax/libs/widget/1.1.0/movie.swf?x=1").status_code == 403
        assert client.get("/ajax/libs/widget/1.1.0/").status_code == 404  # malformed
        assert client.get("/ajax/libs/wid get/1.1.0/widget.js").status_code == 404
        assert client.get("/ajax/libs/widget/9.9.9/widget.js").status_code == 404  # no such version
        assert client.get("/ajax/libs/widget/1.1.0/nothere.js").status_code == 404
        assert client.get("/ajax/libs/widget/1.1.0/" + "a" * 520 + ".js").status_code == 404  # too long
        assert client.post(path).status_code == 405
        metrics = client.get("/metrics").text
        assert "conveyor_cdn_cache_hits_total" in metrics and 'conveyor_cdn_responses_total{status="200"}' in metrics


def exchange(url: str, wire: bytes) -> bytes:
    """Everything the server at ``url`` sends back for ``wire`` on one connection, until it closes it."""
    host, port = url.removeprefix("http://").split(":")
    raw = b""
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(wire)
        while chunk := connection.recv(65536):
            raw += chunk
    return raw


def responses(raw: bytes, methods: list[str]) -> list[tuple[int, dict[str, str], bytes]]:
    """The HTTP/1.1 responses to ``methods``' requests, one after another in ``raw`` (each body of
    its Content-Length; none for HEAD and 304): status, headers, body."""
    answers = []
    for method in methods:
        head, _, raw = raw.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {name.lower(): value.strip() for name, value in (line.split(":", 1) for line in lines)}
        status = int(status_line.split()[1])
        length = 0 if status == 304 or method == "HEAD" else int(headers.get("content-length", "0"))
        answers.append((status, headers, raw[:length]))
        raw = raw[length:]
    assert raw == b"", raw[:200]
    return answers


def pipelined(url: str, requests: list[tuple[str, str, str]]) -> list[tuple[int, dict[str, str], bytes]]:
    """The answers to ``requests`` (method, target, extra header lines) sent at once on one
    connection, the last with ``Connection: close``."""
    wire = b"".join(
        f"{method} {target} HTTP/1.1\r\nHost: cdn\r\n{extra}\r\n\r\n".encode() for method, target, extra in requests
    )
    return responses(exchange(url, wire), [method for method, _, _ in requests])


def test_pipelined_requests_on_one_connection_are_answered_in_order_cached_or_not(
    cv: conveyor.Conveyor, registry: Registry, tmp_path: Path
) -> None:
    """Cached GETs are answered in the connection's own callback (one write), the rest through the
    app: on one keep-alive connection, pipelined, each answer comes whole and in its request's order."""
    published_widget(cv, registry, tmp_path)
    path = "/ajax/libs/widget/1.1.0/widget.js"
    with cdn_server(cv) as server, httpx.Client(base_url=server.url) as client:
        cached, gz = fetch(client, path, "gzip")  # now in the cache
        etag = cached.headers["etag"]
        requests = [
            ("GET", path, "Accept-Encoding: gzip"),  # cached
            ("HEAD", path, "Accept-Encoding: gzip"),
            ("GET", path, f"Accept-Encoding: gzip\r\nIf-None-Match: {etag}"),
            ("GET", "/ajax/libs/widget/1.0.0/widget.js", "Accept-Encoding: identity"),  # a miss, then cached
            ("GET", path + "?v=1", "Accept-Encoding: gzip"),
            ("GET", "/ajax/libs/widget/1.0.0/widget.js", "Accept-Encoding: identity"),
            ("GET", "/libraries/widget?fields=version", "Accept: */*"),
            ("GET", "/ajax/libs/widget/1.1.0/nothere.js", "Accept-Encoding: gzip"),
            ("GET", path, "Accept-Encoding: gzip\r\nConnection: close"),
        ]
        answers = pipelined(server.url, requests)
    assert [status for status, _, _ in answers] == [200, 200, 304, 200, 200, 200, 200, 404, 200]
    for index in (0, 4, 8):
        assert answers[index][2] == gz and answers[index][1]["content-encoding"] == "gzip"
        assert answers[index][1]["etag"] == etag and answers[index][1]["vary"] == "Accept-Encoding"
    assert answers[3][2] == answers[5][2] == script("1.0.0")
    assert orjson.loads(answers[6][2]) == {"version": "1.1.0"}
    assert "date" in answers[0][1] and answers[0][1]["cache-control"] == "public, max-age=30672000, immutable"


# cdnjs's legacy names, each served as the package it points at (cdnjs/origin-worker's constants).
LEGACY_NAMES = {
    "pie": "css3pie",
    "zocial": "css-social-buttons",
    "angular-morris-chart": "angular-morris",
    "bower-angular-translate": "angular-translate",
    "fine-uploader": "file-uploader",
    "bower-angular-translate-loader-partial": "angular-translate-loader-partial",
    "bower-angular-translate-loader-url": "angular-translate-loader-url",
    "bower-angular-translate-loader-static-files": "angular-translate-loader-static-files",
    "nicescroll": "jquery.nicescroll",
}


def test_cdnjs_legacy_names_serve_the_package_they_name_through_the_app_and_from_the_cache(
    cv: conveyor.Conveyor, tmp_path: Path
) -> None:
    libs = tmp_path / "cdnjs" / "ajax" / "libs"
    for target in LEGACY_NAMES.values():
        (libs / target / "1.0.0").mkdir(parents=True)
        (libs / target / "1.0.0" / "lib.js").write_bytes(f"/* {target} */".encode())
    cdn.init(cv, **bucket_urls(cv))  # type: ignore[arg-type]
    assert import_tree(cv, tmp_path / "cdnjs")["failed"] == []
    # Each legacy name twice on one keep-alive connection: the first through the app (a miss), the
    # second a plain GET of a cached file, which the connection's protocol answers itself.
    targets = [f"/ajax/libs/{name}/1.0.0/lib.js" for name in LEGACY_NAMES for _ in range(2)]
    targets += ["/ajax/libs/css3pi/1.0.0/lib.js", "/ajax/libs/Pie/1.0.0/lib.js"]  # no such names
    wire = b"".join(f"GET {t} HTTP/1.1\r\nHost: cdn\r\nAccept-Encoding: identity\r\n\r\n".encode() for t in targets)
    wire += b"GET /ajax/libs/pie/1.0.0/lib.js HTTP/1.1\r\nHost: cdn\r\nAccept-Encoding: br\r\nConnection: close\r\n\r\n"
    with cdn_server(cv) as server:
        answers = responses(exchange(server.url, wire), ["GET"] * (len(targets) + 1))
        assert server.app.cache_hits == len(LEGACY_NAMES)  # every second request of a name
        with httpx.Client(base_url=server.url) as client:  # the API knows the packages, not the names
            assert client.get("/libraries/css3pie").status_code == 200
            assert client.get("/libraries/pie").status_code == 404
    expected = [f"/* {target} */".encode() for target in LEGACY_NAMES.values() for _ in range(2)]
    assert [(status, body) for status, _, body in answers[: len(expected)]] == [(200, body) for body in expected]
    assert [status for status, _, _ in answers[len(expected) :]] == [404, 404, 200]
    assert answers[-1][1]["content-encoding"] == "br" and brotli.decompress(answers[-1][2]) == b"/* css3pie */"


def test_the_libraries_api_answers_in_cdnjs_shapes(cv: conveyor.Conveyor, registry: Registry, tmp_path: Path) -> None:
    published_widget(cv, registry, tmp_path)
    latest = "https://cdnjs.cloudflare.com/ajax/libs/widget/1.1.0/widget.js"
    sris = {"widget.css": sri(STYLE), "widget.js": sri(script("1.1.0"))}
    files = ["fonts/w.woff2", "widget.css", "widget.js"]
    with cdn_server(cv) as server, httpx.Client(base_url=server.url) as client:
        listing = client.get("/libraries")
        assert listing.json() == {"results": [{"name": "widget", "latest": latest}], "total": 1, "available": 1}
        assert listing.headers["cache-control"] == "public, max-age=21600"
        assert listing.headers["access-control-allow-origin"] == "*"
        assert "expires" in listing.headers
        assert client.get("/libraries/").json() == listing.json()
        everything = client.get("/libraries", params={"fields": "*"}).json()["results"][0]
        assert everything == {
            "name": "widget",
            "latest": latest,
            "alternativeNames": [],
            "originalName": "widget",
            "version": "1.1.0",
            "description": "widget for tests",
            "keywords": ["test"],
            "license": "MIT",
            "homepage": "https://example.com/widget",
            "author": "Ada, Grace",
            "filename": "widget.js",
            "sri": sris["widget.js"],
            "fileType": "js",
            "github": None,
            "repository": {"type": "git", "url": "https://example.com/widget.git"},
            "objectID": "widget",
        }
        some = client.get("/libraries", params={"fields": "version,description,nothing"}).json()["results"][0]
        assert some == {
            "name": "widget",
            "latest": latest,
            "version": "1.1.0",
            "description": "widget for tests",
            "nothing": None,
        }
        assert client.get("/libraries", params={"search": "wid"}).json()["total"] == 1
        assert client.get("/libraries", params={"search": "gadget"}).json() == {
            "results": [],
            "total": 0,
            "available": 0,
        }
        by_url = client.get("/libraries", params={"search": "example", "search_fields": "repositories.url"})
        assert by_url.json()["total"] == 1
        assert client.get("/libraries", params={"search": "example", "search_fields": "name"}).json()["total"] == 0
        assert client.get("/libraries", params={"limit": "0"}).json()["total"] == 1

        library = client.get("/libraries/widget")
        assert library.json() == {
            "name": "widget",
            "latest": latest,
            "sri": sris["widget.js"],
            "description": "widget for tests",
            "keywords": ["test"],
            "version": "1.1.0",
            "filename": "widget.js",
            "homepage": "https://example.com/widget",
            "license": "MIT",
            "author": "Ada, Grace",
            "repository": {"type": "git", "url": "https://example.com/widget.git"},
            "autoupdate": {"source": "npm", "target": "widget"},
            "versions": ["2.0.0-rc.1", "1.1.0", "1.0.0"],
            "assets": [{"version": "1.1.0", "files": files, "rawFiles": files, "sri": sris}],
        }
        assert library.headers["cache-control"] == "public, max-age=21600"
        assert client.get("/libraries/widget", params={"fields": "version,sri"}).json() == {
            "version": "1.1.0",
            "sri": sris["widget.js"],
        }
        version = client.get("/libraries/widget/1.0.0")
        assert version.json() == {
            "name": "widget",
            "version": "1.0.0",
            "rawFiles": files,
            "files": files,
            "sri": {"widget.css": sri(STYLE), "widget.js": sri(script("1.0.0"))},
        }
        assert version.headers["cache-control"] == "public, max-age=30672000, immutable"
        assert client.get("/libraries/widget/1.0.0", params={"fields": "files"}).json() == {"files": files}

        for path, message in [
            ("/libraries/nope", "Library not found"),
            ("/libraries/nope/1.0.0", "Library not found"),
            ("/libraries/widget/9.9.9", "Version not found"),
            ("/nowhere", "Endpoint not found"),
        ]:
            missing = client.get(path)
            assert (missing.status_code, missing.json()) == (404, {"error": True, "status": 404, "message": message})
            assert missing.headers["cache-control"] == "public, max-age=3600"

        whitelist = client.get("/whitelist").json()
        assert whitelist["extensions"][:3] == ["js", "mjs", "ts"] and "woff2" in whitelist["extensions"]
        assert whitelist["categories"]["css"] == "Styling" and whitelist["categories"]["map"] == "Source Maps"
        assert client.get("/whitelist", params={"fields": "extensions"}).json().keys() == {"extensions"}
        assert client.get("/stats").json() == {"libraries": 1}
        preflight = client.options("/libraries")
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-methods"] == "GET, OPTIONS"
        assert client.get("/health").text == "OK"


@contextmanager
def primary_on_its_own_server(
    cv: conveyor.Conveyor, registry: Registry, tmp_path: Path, mirror: S3Server | None
) -> Iterator[S3Server]:
    """The widget published to a primary bucket on a moto_server of its own (the test may stop or
    freeze it) and a mirror on ``mirror`` (None: a local bucket of the deployment)."""
    primary = start_s3_server(tmp_path)
    try:
        s3_bucket(cv, primary, "cdn")
        if mirror is None:
            cv.create_bucket("cdn-mirror")
        else:
            s3_bucket(cv, mirror, "cdn-mirror")
        published_widget(cv, registry, tmp_path, mirror="cdn-mirror")
        yield primary
    finally:
        if primary.process.poll() is None:
            os.kill(primary.process.pid, signal.SIGCONT)
            primary.stop()


def every_file_in_every_encoding(client: httpx.Client) -> int:
    """Ask for each file of each version in each encoding: each must be 200 and decode to the
    published bytes. How many were asked."""
    asked = 0
    for version in VERSIONS:
        for file, body in (("widget.js", script(version)), ("widget.css", STYLE)):
            for encoding, decode in DECODE.items():
                answer, sent = fetch(client, f"/ajax/libs/widget/{version}/{file}", encoding)
                assert answer.status_code == 200
                assert decode(sent) == body
                asked += 1
    return asked


@pytest.mark.parametrize("cv", ["sqlite"], indirect=True)
def test_with_the_primary_buckets_server_stopped_the_mirror_serves_with_no_5xx(
    cv: conveyor.Conveyor, registry: Registry, tmp_path: Path, s3_server: S3Server
) -> None:
    with (
        primary_on_its_own_server(cv, registry, tmp_path, s3_server) as primary,
        cdn_server(cv) as server,
        httpx.Client(base_url=server.url) as client,
    ):
        warm = client.get("/ajax/libs/widget/1.0.0/widget.js", headers={"Accept-Encoding": "identity"})
        assert warm.content == script("1.0.0")  # from the primary, now cached
        primary.stop()
        every_file_in_every_encoding(client)
        assert client.get("/ajax/libs/widget/1.0.0/nothere.js").status_code == 404
        assert server.app.source.breaker.opened >= 1
        assert server.app.source.mirror_reads > 0
        assert "conveyor_cdn_primary_circuit_open 1" in client.get("/metrics").text


@pytest.mark.parametrize("cv", ["sqlite"], indirect=True)
def test_with_the_primary_hanging_reads_go_to_the_mirror_without_waiting_on_it_each_time(
    cv: conveyor.Conveyor, registry: Registry, tmp_path: Path, s3_server: S3Server
) -> None:
    with (
        primary_on_its_own_server(cv, registry, tmp_path, s3_server) as primary,
        cdn_server(cv) as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        os.kill(primary.process.pid, signal.SIGSTOP)  # it accepts connections and answers nothing
        asked = every_file_in_every_encoding(client)
        source = server.app.source
        # The breaker opened after its few failures: the other reads never tried the primary.
        assert source.breaker.opened >= 1
        assert source.primary_failures < asked // 2
        assert source.mirror_reads == asked


@pytest.mark.parametrize("cv", ["sqlite"], indirect=True)
def test_with_no_cache_and_the_primary_stopped_a_local_mirror_answers_every_kind_of_request(
    cv: conveyor.Conveyor, registry: Registry, tmp_path: Path
) -> None:
    """The mirror a local bucket: once the breaker is open its small objects are read without a
    thread (plain GETs answered in the connection's callback); HEAD, conditional, refused and
    missing requests still take the app's path, each answer in its request's order."""
    with primary_on_its_own_server(cv, registry, tmp_path, None) as primary:
        primary.stop()
        with (
            conveyor.connect(cv.url) as server_cv,  # as `cdn serve` runs: the buckets not opened yet
            cdn_server(server_cv, cache_bytes=0) as server,
            httpx.Client(base_url=server.url) as client,
        ):
            asked = every_file_in_every_encoding(client)
            every_file_in_every_encoding(client)
            path = "/ajax/libs/widget/1.1.0/widget.js"
            first, gz = fetch(client, path, "gzip")
            requests = [
                ("GET", path, "Accept-Encoding: gzip"),
                ("HEAD", path, "Accept-Encoding: gzip"),
                ("GET", path, f"Accept-Encoding: gzip\r\nIf-None-Match: {first.headers['etag']}"),
                ("GET", "/ajax/libs/widget/1.1.0/fonts/w.woff2", "Accept-Encoding: br"),
                ("GET", "/ajax/libs/widget/1.1.0/nothere.js", "Accept-Encoding: gzip"),
                ("GET", "/ajax/libs/widget/9.9.9/widget.js", "Accept-Encoding: gzip"),
                ("GET", "/ajax/libs/widget/1.1.0/widget.exe", "Accept-Encoding: gzip"),
                ("GET", "/ajax/libs/widget/1.1.0/../1.0.0/widget.js", "Accept-Encoding: gzip"),
                ("GET", path + "?v=1", "Accept-Encoding: gzip"),
                ("GET", path, "Accept-Encoding: gzip\r\nConnection: close"),
            ]
            answers = pipelined(server.url, requests)
            assert [status for status, _, _ in answers] == [200, 200, 304, 200, 404, 404, 403, 404, 200, 200]
            for index in (0, 8, 9):
                assert answers[index][2] == gz and answers[index][1]["etag"] == first.headers["etag"]
                assert answers[index][1]["last-modified"] == first.headers["last-modified"]
            assert answers[3][2] == FONT and "content-encoding" not in answers[3][1]
            source = server.app.source
            assert source.breaker.is_open and source.mirror_reads >= 2 * asked
            assert server.app.cache.size == 0 and server.app.cache_hits == 0
            assert not [status for status in server.app.responses if status >= 500]
