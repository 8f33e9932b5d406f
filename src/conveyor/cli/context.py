"""What every command shares: the deployment it talks to, ``--json``, and how errors are reported."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click
from rich.console import Console, RenderableType

import conveyor
from conveyor.errors import ConveyorError

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class CliState:
    """The root command's options, and the connection it opens on first use."""

    url: str | None
    token: str | None = None
    account_id: str | None = None
    _client: conveyor.Conveyor | None = field(default=None, repr=False)

    def connect(self) -> conveyor.Conveyor:
        if self._client is None:
            self._client = conveyor.connect(self.url, token=self.token, account_id=self.account_id)
            click.get_current_context().call_on_close(self.close)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


pass_state = click.make_pass_decorator(CliState)


class ConveyorGroup(click.Group):
    """A command group that reports a ``ConveyorError`` as one line on stderr and exits with 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ConveyorError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(1)


class CliError(click.ClickException):
    """A refusal of the CLI itself (not of the engine): ``error: <message>`` and exit code 1."""

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def json_option(fn: F) -> F:
    """``--json``: print one machine-readable JSON document instead of tables."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print machine-readable JSON (stable keys, Cloudflare's object shapes) instead of tables.",
    )(fn)


def console(stderr: bool = False) -> Console:
    """A rich console on the current stdout/stderr (looked up per call, so test runners capture it)."""
    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def emit(as_json: bool, data: Any, human: Callable[[], RenderableType | str]) -> None:
    """Print ``data`` as JSON, or what ``human()`` renders for people."""
    if as_json:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        console().print(human())
