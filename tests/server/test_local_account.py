"""The command line and ``conveyor serve`` on one directory see the same queues: account ``local``'s,
by the same names."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx

import conveyor

from .process import CONVEYOR, ServeProcess, serve_process


def cli(data: Path, *args: str) -> str:
    """``conveyor --url sqlite://DATA ...`` as a user runs it, in its own process."""
    return subprocess.run(
        [CONVEYOR, "--url", f"sqlite://{data}", *args], check=True, capture_output=True, text=True
    ).stdout


def served_names(proc: ServeProcess) -> list[str]:
    r = httpx.get(
        f"{proc.url}/client/v4/accounts/{proc.account_id}/queues",
        headers={"authorization": f"Bearer {proc.token}"},
    )
    assert r.status_code == 200, r.text
    return [q["queue_name"] for q in r.json()["result"]]


def test_a_queue_made_by_the_cli_shows_on_the_server_for_account_local(tmp_path: Path) -> None:
    data = tmp_path / "data"
    cli(data, "queues", "create", "emails")
    with serve_process(data, "local") as proc:
        assert served_names(proc) == ["emails"]
        cli(data, "send", "emails", '{"to": "a@b"}')
        with conveyor.connect(proc.url, token=proc.token, account_id="local") as remote:
            [m] = remote.queue("emails").peek()
            assert m.body == {"to": "a@b"}


def test_a_queue_made_on_the_server_shows_in_the_cli_by_its_own_name(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serve_process(data, "local") as proc:
        with conveyor.connect(proc.url, token=proc.token, account_id="local") as remote:
            remote.create_queue("from-server")
        listed = json.loads(cli(data, "queues", "list", "--json"))
        assert [q["queue_name"] for q in listed] == ["from-server"]
        # The name the CLI shows is one it accepts.
        cli(data, "send", "from-server", '"hi"')
        with conveyor.connect(f"sqlite://{data}") as embedded:
            assert [m.body for m in embedded.queue("from-server").peek()] == ["hi"]


def test_the_cli_account_option_reaches_another_account_on_the_server(tmp_path: Path) -> None:
    data = tmp_path / "data"
    cli(data, "--account", "acc1", "queues", "create", "billing")
    cli(data, "queues", "create", "emails")
    with serve_process(data, "acc1") as proc:
        assert served_names(proc) == ["billing"]
    assert [q["queue_name"] for q in json.loads(cli(data, "--account-id", "acc1", "queues", "list", "--json"))] == [
        "billing"
    ]
