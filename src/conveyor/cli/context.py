"""What every command shares: the deployment it talks to, ``--json``, and how errors are reported."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click
from rich.console import Console, RenderableType

import conveyor
from conveyor.errors import ConveyorError
from conveyor.extras import MissingExtra

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class CliState:
    """The root command's options, and the connection it opens on first use."""

    url: str | None
    token: str | None = None
    account_id: str | None = None
    as_json: bool = False  # the root's --json, which every command's own --json adds to
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
    """A command group that reports every refusal in one form, ``error: <message>`` on stderr: a
    ``ConveyorError`` (exit 1) and click's own (a usage error after the usage line, exit 2)."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.ClickException as exc:
            raise in_our_form(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (ConveyorError, MissingExtra) as exc:  # MissingExtra: e.g. a postgresql:// URL without psycopg
            click.echo(f"error: {exc}", err=True)
            ctx.exit(1)
        except click.ClickException as exc:
            raise in_our_form(exc) from None


class CliError(click.ClickException):
    """A refusal of the CLI itself (not of the engine): ``error: <message>`` and exit code 1."""

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class CliUsageError(click.UsageError):
    """A usage error shown as click shows one (the usage line, the help hint), but with ``error:``."""

    def show(self, file: Any = None) -> None:
        if self.ctx is not None:
            hint = f"Try '{self.ctx.command_path} {self.ctx.help_option_names[0]}' for help."
            click.echo(f"{self.ctx.get_usage()}\n{hint}\n", err=True, color=self.ctx.color)
        click.echo(f"error: {self.format_message()}", err=True)


def in_our_form(exc: click.ClickException) -> click.ClickException:
    """``exc`` shown as ``error: ...`` (click's own say ``Error: ...``), with its exit code (2 for
    a usage error, else 1)."""
    if isinstance(exc, CliError | CliUsageError):
        return exc
    if isinstance(exc, click.UsageError):
        return CliUsageError(exc.format_message(), exc.ctx)
    return CliError(exc.format_message())


def json_option(fn: F) -> F:
    """``--json``: print one machine-readable JSON document instead of tables. Given before the
    command (``conveyor --json queues list``) it applies too."""

    @functools.wraps(fn)
    def command(*args: Any, as_json: bool, **kwargs: Any) -> Any:
        root = click.get_current_context().find_object(CliState)
        return fn(*args, as_json=as_json or (root is not None and root.as_json), **kwargs)

    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print machine-readable JSON (stable keys, Cloudflare's object shapes) instead of tables.",
    )(command)  # type: ignore[return-value]


def visibility_timeout_options(what: str, default: str) -> Callable[[F], F]:
    """``--visibility-timeout-secs`` (wrangler's unit) or ``--visibility-timeout-ms`` (the API's),
    passed to the command as ``visibility_timeout_ms`` (``None`` when neither is given)."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def command(*args: Any, visibility_timeout_secs: int | None, **kwargs: Any) -> Any:
            ms = kwargs.pop("visibility_timeout_ms")
            if visibility_timeout_secs is not None and ms is not None:
                raise click.UsageError("give --visibility-timeout-secs or --visibility-timeout-ms, not both")
            if visibility_timeout_secs is not None:
                ms = visibility_timeout_secs * 1000
            return fn(*args, visibility_timeout_ms=ms, **kwargs)

        with_ms = click.option(
            "--visibility-timeout-ms", type=int, help=f"{what}, in milliseconds (default: {default})."
        )(command)
        return click.option(  # type: ignore[return-value]
            "--visibility-timeout-secs", type=int, help=f"{what}, in seconds, wrangler's unit (default: {default})."
        )(with_ms)

    return decorate


# Output to a pipe or a file is laid out this wide: wide enough that a table row (full 32-character
# ids, names up to 63 characters) stays on one line, as scripts and grep expect.
PIPE_WIDTH = 1000


def console(stderr: bool = False) -> Console:
    """A rich console on the current stdout/stderr (looked up per call, so test runners capture it);
    not a terminal, its lines are not wrapped or folded to 80 columns."""
    out = Console(stderr=stderr, highlight=False, soft_wrap=False)
    if not out.is_terminal:
        out.width = PIPE_WIDTH
    return out


def emit(as_json: bool, data: Any, human: Callable[[], RenderableType | str]) -> None:
    """Print ``data`` as JSON, or what ``human()`` renders for people."""
    if as_json:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        console().print(human())
