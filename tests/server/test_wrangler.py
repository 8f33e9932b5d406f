"""Cloudflare's wrangler CLI (``wrangler queues ...``) against ``conveyor serve``.

wrangler comes from the npm registry, pinned, installed on first use into ``.tools/wrangler`` (the
project's own tool directory), so the test needs nothing installed by hand.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import npm_tools
from tests.npm_tools import npm_binary

from .process import ServeProcess, serve_process

WRANGLER_VERSION = "4.86.0"
TOOLS = npm_tools.TOOLS / "wrangler"


@pytest.fixture(scope="module")
def wrangler_bin() -> Path:
    return npm_binary(TOOLS, "wrangler", WRANGLER_VERSION, "wrangler")


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    with serve_process(tmp_path_factory.mktemp("wrangler") / "data", "wacc") as running:
        yield running


def run(wrangler: Path, proc: ServeProcess, *args: str) -> str:
    # wrangler keeps state in ./.wrangler: run it beside the server's data, not in the checkout.
    cwd = proc.data.parent
    env = {
        **os.environ,
        "CLOUDFLARE_API_BASE_URL": proc.url + "/client/v4",
        "CLOUDFLARE_API_TOKEN": proc.token,
        "CLOUDFLARE_ACCOUNT_ID": proc.account_id,
        "WRANGLER_SEND_METRICS": "false",
        "CI": "true",
    }
    done = subprocess.run(
        [str(wrangler), "queues", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _queue(proc: ServeProcess, name: str) -> dict[str, object]:
    r = httpx.get(
        f"{proc.url}/client/v4/accounts/{proc.account_id}/queues",
        params={"name": name},
        headers={"authorization": f"Bearer {proc.token}"},
    )
    found: list[dict[str, object]] = r.json()["result"]
    return found[0] if found else {}


def test_wrangler_queue_commands_work_against_conveyor(wrangler_bin: Path, proc: ServeProcess) -> None:
    run(wrangler_bin, proc, "create", "wq")
    assert _queue(proc, "wq")["queue_name"] == "wq"
    assert "wq" in run(wrangler_bin, proc, "list")
    info = run(wrangler_bin, proc, "info", "wq")
    assert "Queue Name: wq" in info and str(_queue(proc, "wq")["queue_id"]) in info

    run(wrangler_bin, proc, "consumer", "http", "add", "wq")
    consumers = _queue(proc, "wq")["consumers"]
    assert [c["type"] for c in consumers] == ["http_pull"]  # type: ignore[attr-defined,index]

    run(wrangler_bin, proc, "pause-delivery", "wq")
    assert _queue(proc, "wq")["settings"]["delivery_paused"] is True  # type: ignore[index]
    run(wrangler_bin, proc, "resume-delivery", "wq")
    assert _queue(proc, "wq")["settings"]["delivery_paused"] is False  # type: ignore[index]

    queue_id = _queue(proc, "wq")["queue_id"]
    httpx.post(
        f"{proc.url}/client/v4/accounts/{proc.account_id}/queues/{queue_id}/messages",
        json={"body": {"n": 1}},
        headers={"authorization": f"Bearer {proc.token}"},
    )
    run(wrangler_bin, proc, "purge", "wq", "--force")
    r = httpx.get(
        f"{proc.url}/client/v4/accounts/{proc.account_id}/queues/{queue_id}/metrics",
        headers={"authorization": f"Bearer {proc.token}"},
    )
    assert r.json()["result"]["backlog_count"] == 0

    run(wrangler_bin, proc, "delete", "wq")
    assert _queue(proc, "wq") == {}
