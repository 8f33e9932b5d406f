"""``--egress-allow`` on the commands that reach tenant URLs: validated, then added to the process's policy."""

from __future__ import annotations

import os

import click
import pytest
from click.testing import CliRunner

from conveyor.cli.egress_option import egress_allow_option
from conveyor.egress import ENVIRONMENT_VARIABLE, EgressPolicy, check_url


@click.command()
@egress_allow_option
def probe() -> None:
    check_url("http://127.0.0.1:9000", EgressPolicy.from_environment())
    click.echo(os.environ[ENVIRONMENT_VARIABLE])


def test_allowed_hosts_join_the_environment_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "minio.internal")
    result = CliRunner().invoke(probe, ["--egress-allow", "127.0.0.1", "--egress-allow", "10.0.0.0/8"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "minio.internal,127.0.0.1,10.0.0.0/8"


def test_a_bad_entry_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENVIRONMENT_VARIABLE, raising=False)
    result = CliRunner().invoke(probe, ["--egress-allow", "10.0.0.0/99"])
    assert result.exit_code == 2
    assert "10.0.0.0/99" in result.output


@pytest.mark.parametrize("command", [["serve", "--help"], ["worker", "--help"]])
def test_serve_and_worker_take_the_option(command: list[str]) -> None:
    from conveyor.cli.main import cli

    assert "--egress-allow" in CliRunner().invoke(cli, command).output
