"""The CDN's "done when": ``conveyor cdn run`` on a fresh directory, given cdnjs's package configs
for jquery, bootstrap and lodash and a registry-shaped server with their real ``npm pack``
tarballs (three versions each, with their real ``dist.integrity``), publishes every version
unattended (a compressor SIGKILLed on the way); what it serves is checked against the tarballs'
bytes and api.cdnjs.com's shapes."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import signal
import tarfile
from pathlib import Path
from typing import Any

import brotli
import httpx

import conveyor
from conveyor.cdn.compression import COMPRESSION_QUEUE
from tests.cdn.conftest import Registry, write_config
from tests.cdn.npm_tarballs import PINNED, npm_tarball
from tests.cdn.test_run import cdn_run, compressor_pids
from tests.cli.support import Cli
from tests.waiting import wait_for

# cdnjs's configs (packages/<letter>/<name>.json), with their fileMaps.
CONFIGS: list[dict[str, Any]] = [
    {
        "name": "jquery",
        "description": "JavaScript library for DOM operations",
        "keywords": ["jquery", "library", "ajax", "framework", "toolkit", "popular"],
        "authors": [
            {
                "name": "jQuery Foundation and other contributors",
                "url": "https://github.com/jquery/jquery/blob/master/AUTHORS.txt",
            }
        ],
        "license": "MIT",
        "homepage": "http://jquery.com/",
        "repository": {"type": "git", "url": "https://github.com/jquery/jquery.git"},
        "filename": "jquery.min.js",
        "autoupdate": {
            "source": "npm",
            "target": "jquery",
            "fileMap": [
                {
                    "basePath": "dist",
                    "files": [
                        "jquery.js",
                        "jquery.min.js",
                        "jquery.min.map",
                        "jquery.slim.js",
                        "jquery.slim.min.js",
                        "jquery.slim.min.map",
                    ],
                }
            ],
        },
    },
    {
        "name": "bootstrap",
        "description": (
            "The most popular front-end framework for developing responsive, mobile first projects on the web."
        ),
        "keywords": [
            "css",
            "less",
            "mobile-first",
            "responsive",
            "front-end",
            "framework",
            "web",
            "twitter",
            "bootstrap",
        ],
        "authors": [{"name": "Twitter, Inc."}, {"name": "The Bootstrap Authors"}],
        "license": "MIT",
        "homepage": "https://getbootstrap.com/",
        "repository": {"type": "git", "url": "https://github.com/twbs/bootstrap.git"},
        "filename": "css/bootstrap.min.css",
        "autoupdate": {
            "source": "npm",
            "target": "bootstrap",
            "fileMap": [{"basePath": "dist", "files": ["css/**/*", "js/**/*"]}],
        },
    },
    {
        "name": "lodash.js",
        "description": "Lodash modular utilities.",
        "keywords": ["modules", "stdlib", "util"],
        "authors": [{"name": "John-David Dalton", "email": "john.david.dalton@gmail.com"}],
        "license": "MIT",
        "homepage": "https://lodash.com/",
        "repository": {"type": "git", "url": "https://github.com/lodash/lodash.git"},
        "filename": "lodash.min.js",
        "autoupdate": {
            "source": "npm",
            "target": "lodash",
            "fileMap": [{"basePath": "", "files": ["lodash.js", "lodash.min.js"]}],
        },
    },
]
TARGETS = {config["name"]: config["autoupdate"]["target"] for config in CONFIGS}
VERSIONS = {name: sorted(v for (t, v) in PINNED if t == target) for name, target in TARGETS.items()}
LIBRARY_FIELDS = {
    "name",
    "latest",
    "sri",
    "description",
    "keywords",
    "version",
    "filename",
    "homepage",
    "license",
    "author",
    "repository",
    "autoupdate",
    "versions",
    "assets",
}


def tarball_files(data: bytes) -> dict[str, bytes]:
    """The regular files of an npm tarball, ``package/`` stripped."""
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        return {
            member.name.split("/", 1)[1]: archive.extractfile(member).read()  # type: ignore[union-attr]
            for member in archive.getmembers()
            if member.isfile()
        }


def selected(name: str, files: dict[str, bytes]) -> dict[str, bytes]:
    """cdnjs's selection by the config's fileMap, written out by hand: path under basePath → bytes."""
    if name == "jquery":
        wanted = CONFIGS[0]["autoupdate"]["fileMap"][0]["files"]
        return {f: files[f"dist/{f}"] for f in wanted}
    if name == "bootstrap":
        return {p.removeprefix("dist/"): b for p, b in files.items() if p.startswith(("dist/css/", "dist/js/"))}
    return {p: files[p] for p in ("lodash.js", "lodash.min.js")}


def twins(files: dict[str, bytes], chosen: dict[str, bytes], base: str) -> set[str]:
    """Where cdnjs would make a .min twin: a chosen .js/.css not *.min.* with no x.min sibling in
    the tarball."""
    made = set()
    for dest in chosen:
        stem, _, ext = dest.rpartition(".")
        if ext in ("js", "css") and not stem.endswith(".min") and f"{base}{stem}.min.{ext}" not in files:
            made.add(f"{stem}.min.{ext}")
    return made


def sri(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def raw(client: httpx.Client, url: str, encoding: str) -> httpx.Response:
    """The response as sent (not decoded by httpx)."""
    with client.stream("GET", url, headers={"Accept-Encoding": encoding}) as response:
        response._content = b"".join(response.iter_raw())
    return response


def test_cdn_run_publishes_jquery_bootstrap_and_lodash_from_their_real_tarballs(
    tmp_path: Path, registry: Registry
) -> None:
    tarballs = {(name, v): npm_tarball(TARGETS[name], v) for name, versions in VERSIONS.items() for v in versions}
    for (name, version), data in tarballs.items():
        registry.publish(TARGETS[name], version, data)  # its dist.integrity: the pinned sha512
    for config in CONFIGS:
        write_config(tmp_path / "cdnjs", config)
    url = f"sqlite://{tmp_path / 'data'}"
    run = Cli(url)
    run.json("cdn", "init", "--registry", registry.url)
    cv = conveyor.connect(url)
    assert run.json("cdn", "add", str(tmp_path / "cdnjs" / "packages")) == {
        "added": ["bootstrap", "jquery", "lodash.js"]
    }

    options = ("--compressors", "2", "--visibility-timeout", "3")
    with cdn_run(url, tmp_path / "run.log", *options) as (process, served), httpx.Client() as client:
        # A compressor SIGKILLed mid-job: cdn run starts another, its job is done again.
        jobs = cv.queue(COMPRESSION_QUEUE)
        wait_for(lambda: jobs.counters().in_flight >= 1, 120, "the first compression job", poll=0.05)
        [killed, spared] = compressor_pids(process.pid)
        os.kill(killed, signal.SIGKILL)

        def replaced() -> bool:
            now = compressor_pids(process.pid)
            return killed not in now and spared in now and len(now) == 2

        wait_for(replaced, 30, "a compressor in the killed one's place")
        states: dict[str, int] = {}

        def all_ended() -> bool:
            states.clear()
            states.update(run.json("cdn", "status")["versions"])
            return states.get("published", 0) + states.get("failed", 0) == len(tarballs)

        wait_for(all_ended, 240, "every version to be published", poll=0.5)
        assert states == {"published": len(tarballs)}, (tmp_path / "run.log").read_text()

        for (name, version), data in tarballs.items():
            files = tarball_files(data)
            chosen = selected(name, files)
            base = "dist/" if name in ("jquery", "bootstrap") else ""
            made = twins(files, chosen, base)
            assert made == set()  # every .js/.css of these packages ships its own .min sibling
            answer = client.get(f"{served}/libraries/{name}/{version}")
            assert answer.status_code == 200
            body = answer.json()
            assert list(body) == ["name", "version", "rawFiles", "files", "sri"]
            assert (body["name"], body["version"]) == (name, version)
            assert sorted(body["rawFiles"]) == sorted([*chosen, *made])  # no .min of a *.min.* file
            assert body["files"] == body["rawFiles"]  # every extension here is whitelisted
            assert body["sri"] == {f: sri(b) for f, b in chosen.items() if f.endswith((".js", ".css"))}
            for dest, original in chosen.items():
                file_url = f"{served}/ajax/libs/{name}/{version}/{dest}"
                plain = raw(client, file_url, "identity")
                assert plain.status_code == 200 and plain.content == original, dest
                br = raw(client, file_url, "br")
                assert br.headers["content-encoding"] == "br" and brotli.decompress(br.content) == original
                gz = raw(client, file_url, "gzip")
                assert gz.headers["content-encoding"] == "gzip" and gzip.decompress(gz.content) == original

        listing = client.get(f"{served}/libraries").json()
        assert listing == {
            "results": [
                {
                    "name": "bootstrap",
                    "latest": "https://cdnjs.cloudflare.com/ajax/libs/bootstrap/5.3.3/css/bootstrap.min.css",
                },
                {"name": "jquery", "latest": "https://cdnjs.cloudflare.com/ajax/libs/jquery/3.7.1/jquery.min.js"},
                {
                    "name": "lodash.js",
                    "latest": "https://cdnjs.cloudflare.com/ajax/libs/lodash.js/4.17.21/lodash.min.js",
                },
            ],
            "total": 3,
            "available": 3,
        }
        found = client.get(f"{served}/libraries", params={"search": "jq", "fields": "version,filename"}).json()
        assert found["results"] == [
            {
                "name": "jquery",
                "latest": "https://cdnjs.cloudflare.com/ajax/libs/jquery/3.7.1/jquery.min.js",
                "version": "3.7.1",
                "filename": "jquery.min.js",
            }
        ]

        jquery = client.get(f"{served}/libraries/jquery").json()
        assert set(jquery) == LIBRARY_FIELDS
        latest = selected("jquery", tarball_files(tarballs[("jquery", "3.7.1")]))
        assert jquery["name"] == "jquery" and jquery["version"] == "3.7.1"
        assert jquery["latest"] == "https://cdnjs.cloudflare.com/ajax/libs/jquery/3.7.1/jquery.min.js"
        assert jquery["sri"] == sri(latest["jquery.min.js"])
        assert (jquery["description"], jquery["keywords"]) == (CONFIGS[0]["description"], CONFIGS[0]["keywords"])
        assert (jquery["filename"], jquery["homepage"], jquery["license"]) == (
            "jquery.min.js",
            "http://jquery.com/",
            "MIT",
        )
        assert isinstance(jquery["author"], str | dict | list) and jquery["author"]
        assert jquery["repository"] == {"type": "git", "url": "https://github.com/jquery/jquery.git"}
        assert jquery["autoupdate"] == {"source": "npm", "target": "jquery"}
        assert jquery["versions"] == ["3.7.1", "3.7.0", "3.6.4"]  # newest first
        [asset] = jquery["assets"]  # only the latest version
        assert list(asset) == ["version", "files", "rawFiles", "sri"]
        assert asset["version"] == "3.7.1" and sorted(asset["rawFiles"]) == sorted(latest)
        assert asset["sri"] == {f: sri(b) for f, b in latest.items() if f.endswith(".js")}

        process.terminate()
        assert process.wait(90) == 0, (tmp_path / "run.log").read_text()
    assert jobs.metrics().backlog_count == 0
    cv.close()
