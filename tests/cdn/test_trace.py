"""``conveyor trace`` of one package update shows it end to end: the update, each version's
download under the step that started it, each file's processing under the fan-out, the compression
jobs each sent and the event that woke each wait (naming the job and the compressor that did it),
and the publishing under the download's last step."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import conveyor
from conveyor import cdn
from conveyor.cdn.pipeline import (
    DOWNLOAD_WORKFLOW,
    PUBLISH_WORKFLOW,
    UPDATES_WORKFLOW,
    account_of,
    download_id,
    publish_id,
)
from tests.cdn.conftest import Registry, build_tarball, ended, package_config, worker, write_config
from tests.cli.support import Cli


def step(node: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [s for s in node["steps"] if s["name"] == name]
    return found


def test_the_trace_of_an_update_shows_downloads_processing_compression_and_publishing(
    tmp_path: Path, registry: Registry
) -> None:
    url = f"sqlite://{tmp_path / 'data'}"
    script = b"function double(longName) {\n  return longName * 2;\n}\n"
    registry.publish("gadget", "1.0.0", build_tarball({"dist/gadget.js": script, "dist/notes.json": b"{}"}))
    with conveyor.connect(url) as cv:
        cdn.init(cv, registry=registry.url)
        cdn.add(cv, write_config(tmp_path, package_config("gadget", ["*"])))
        with worker(cv):
            update = cdn.update(cv)
            assert ended(cv, UPDATES_WORKFLOW, update) == "complete"
            assert ended(cv, DOWNLOAD_WORKFLOW, download_id(account_of(cv), "gadget", "1.0.0")) == "complete"
            assert ended(cv, PUBLISH_WORKFLOW, publish_id(account_of(cv), "gadget", "1.0.0")) == "complete"

    run = Cli(url)
    tree = run.json("trace", f"{UPDATES_WORKFLOW}/{update}")
    assert tree["summary"]["instances"] == {"complete": 5}  # update, download, 2 files, publishing
    [root] = tree["instances"]
    assert (root["workflow"], root["id"]) == (UPDATES_WORKFLOW, update)
    [download] = step(root, "check gadget-1")["children"]
    assert download["workflow"] == DOWNLOAD_WORKFLOW
    files = step(download, "fan out-1")["children"]
    assert sorted(f["workflow"] for f in files) == ["cdn-process-file"] * 2
    compressors = set()
    for node in files:
        [attempt] = step(node, "send compression jobs-1")["attempts"]
        jobs = [m["id"] for m in attempt["messages"]]
        assert all(m["queue"] == "cdn-compress" for m in attempt["messages"])
        waits = [s for s in node["steps"] if s["type"] == "waitForEvent"]
        assert len(waits) == len(jobs) and len(jobs) in (1, 2)  # gadget.js has its .min twin
        woken = [w["event"]["payload"] for w in waits]
        assert sorted(p["job"] for p in woken) == sorted(jobs)  # each wait names the job that woke it
        for payload in woken:
            assert payload["key"].startswith("files/gadget/1.0.0/")
            assert set(payload["sizes"]) == {".br", ".gz"} and all(n > 0 for n in payload["sizes"].values())
            compressors.add(payload["compressor"])
    assert len(compressors) == 1 and compressors.pop().endswith(f":{os.getpid()}")  # the worker's own
    [publishing] = step(download, "start publishing-1")["children"]
    assert (publishing["workflow"], publishing["status"]) == (PUBLISH_WORKFLOW, "complete")
    assert [s["name"] for s in publishing["steps"]] == [
        "plan-1",
        "copy files 0-1",
        "write metadata-1",
        "make visible-1",
        "write package-1",
    ]

    text = run.ok("trace", f"{DOWNLOAD_WORKFLOW}/{download['id']}").stdout  # any instance of it: the same trace
    assert f"{UPDATES_WORKFLOW}/{update}" in text and f"{PUBLISH_WORKFLOW}/{publishing['id']}" in text
    assert "message cdn-compress/" in text and "event compressed-" in text
