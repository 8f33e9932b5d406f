"""What a client sends cannot forge log lines, odd digits and account ids are refused, requests are
logged at DEBUG, and refusals never show a tenant the server's file paths. Against a real
``conveyor serve``."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .process import CONVEYOR, ServeProcess, serve_process


def _log(proc: ServeProcess) -> Path:
    return proc.data.parent / f"serve-{proc.url.rsplit(':', 1)[1]}.log"


def _wait_for(path: Path, text: str, seconds: float = 10.0) -> str:
    deadline = time.monotonic() + seconds
    while text not in (content := path.read_text(errors="replace")) and time.monotonic() < deadline:
        time.sleep(0.05)
    return content


@pytest.fixture
def debug(tmp_path: Path) -> Iterator[ServeProcess]:
    with serve_process(tmp_path / "data", "acc1", "--log-level", "debug") as running:
        yield running


def test_a_newline_in_the_path_cannot_forge_a_log_line_and_nul_is_escaped(debug: ServeProcess) -> None:
    forged = "2026-12-01 12:00:00,000 INFO conveyor.server [-] FORGED admin logged in"
    httpx.get(f"{debug.url}/healthz%0A{forged.replace(' ', '%20')}")
    httpx.get(f"{debug.url}/nul%00byte")
    text = _wait_for(_log(debug), "nul\\x00byte")
    assert "/healthz\\n" + forged in text  # the request is there, on its own line, escaped
    assert not any(line.startswith("2026-12-01 12:00:00,000") for line in text.splitlines())
    assert b"\x00" not in _log(debug).read_bytes()


def test_requests_are_logged_at_debug_so_a_default_server_logs_none(tmp_path: Path, debug: ServeProcess) -> None:
    with serve_process(tmp_path / "quiet" / "data", "acc1") as quiet:
        for _ in range(20):
            assert httpx.get(quiet.url + "/healthz").status_code == 200
        httpx.get(quiet.url + "/healthz?last")
        time.sleep(0.3)
        assert "conveyor.server.access" not in _log(quiet).read_text()
    httpx.get(debug.url + "/healthz?seen")
    assert "DEBUG conveyor.server.access" in _wait_for(_log(debug), "/healthz")


@pytest.mark.parametrize("query", ["page=²", "per_page=٣", "page=１", "per_page=3.0", "page=0"])
def test_page_and_per_page_take_ascii_digits_only(debug: ServeProcess, query: str) -> None:
    r = httpx.get(
        f"{debug.url}/client/v4/accounts/acc1/queues?{query}", headers={"authorization": f"Bearer {debug.token}"}
    )
    assert r.status_code == 400, r.text
    assert r.json()["errors"][0]["code"] == 10207
    assert "it must be a whole number from 1 to" in r.json()["errors"][0]["message"]


def test_an_account_id_with_a_trailing_newline_is_refused(tmp_path: Path) -> None:
    made = subprocess.run(
        [CONVEYOR, "--url", f"sqlite://{tmp_path / 'data'}", "tokens", "create", "--account", "acca\n"],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 1 and "invalid account id 'acca\\n'" in made.stderr
    assert "cvt_" not in made.stdout
    with serve_process(tmp_path / "open" / "data", "acc1", "--no-auth") as proc:
        r = httpx.get(f"{proc.url}/client/v4/accounts/acca%0A/queues")
        assert r.status_code == 400 and "invalid account id" in r.json()["errors"][0]["message"]
        assert httpx.get(f"{proc.url}/client/v4/accounts/acca/queues").status_code == 200


def test_a_storage_error_shows_the_tenant_no_server_path_and_the_log_keeps_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    headers: dict[str, str] = {}
    with serve_process(data, "acc1") as proc:
        headers = {"authorization": f"Bearer {proc.token}"}
        created = httpx.post(f"{proc.url}/client/v4/accounts/acc1/queues", json={"queue_name": "q"}, headers=headers)
        qid = created.json()["result"]["queue_id"]
        assert httpx.post(
            f"{proc.url}/client/v4/accounts/acc1/queues/{qid}/messages", json={"body": 1}, headers=headers
        )
    shard = next((data / "shards").glob(f"{qid}.*.db"))
    for side in shard.parent.glob(shard.name + "-*"):
        side.unlink()
    shard.write_bytes(b"garbage!" * 4096)  # a damaged file, as a bad disk leaves one
    with serve_process(data, "acc1") as proc:
        headers = {"authorization": f"Bearer {proc.token}"}
        r = httpx.post(f"{proc.url}/client/v4/accounts/acc1/queues/{qid}/messages", json={"body": 2}, headers=headers)
        assert r.status_code == 500
        message = r.json()["errors"][0]["message"]
        assert shard.name in message and "is corrupt" in message
        assert str(tmp_path) not in r.text and "/shards/" not in r.text
        assert str(shard) in _wait_for(_log(proc), str(shard))
