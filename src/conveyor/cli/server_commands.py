"""``conveyor serve`` (the HTTP service) and ``conveyor tokens`` (its API tokens)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from conveyor.cli.context import CliError, CliState, pass_state
from conveyor.cli.egress_option import egress_allow_option
from conveyor.client.backpressure import QueueLimits
from conveyor.client.connect import DEFAULT_URL, open_engine
from conveyor.engine.history import (
    DEFAULT_INTERVAL_SECONDS,
    DEFAULT_KEEP_SECONDS,
    MIN_INTERVAL_SECONDS,
    HistorySettings,
)
from conveyor.server.http_protocol import BODY_SECONDS, HEAD_SECONDS, MAX_CONNECTIONS, ConnectionLimits
from conveyor.server.serve import DEFAULT_PORT, KEEP_ALIVE_SECONDS, serve
from conveyor.server.token_tables import NOT_A_DEPLOYMENT, open_token_store
from conveyor.server.tokens import Token, TokenStore

F = TypeVar("F", bound=Callable[..., Any])

TOKENS_DB_HELP = (
    "A tokens.db of an older Conveyor to import into the deployment's catalog, once (a SQLite "
    "deployment's own DIR/tokens.db is imported without it)."
)


def _where(host: str, port: int, secret: str | None, account: str | None) -> str:
    base = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    token = secret or "<token from: conveyor tokens create --account ACC>"
    acc = account or "<ACC>"
    return "\n".join(
        [
            f"Conveyor is serving Cloudflare's Queues API at {base}/client/v4",
            f"  Python SDK: Cloudflare(base_url='{base}/client/v4', api_token='{token}')",
            f"  wrangler:   CLOUDFLARE_API_BASE_URL={base}/client/v4 CLOUDFLARE_API_TOKEN={token} "
            f"CLOUDFLARE_ACCOUNT_ID={acc}",
            f"  conveyor:   conveyor.connect('{base}', token='{token}', account_id='{acc}')",
            f"  metrics:    {base}/metrics    OpenAPI: {base}/openapi.json",
        ]
    )


def _check_apps(targets: tuple[str, ...]) -> tuple[str, ...]:
    for target in targets:
        if target.startswith("-") or ":" not in target:
            raise click.BadParameter(
                f"{target!r} is not module:attribute naming a conveyor.App, e.g. --worker myapp.workers:app "
                "(for handler functions, use --handlers MODULE)",
                param_hint="--worker",
            )
    return targets


def _queue_limit(flag: str, kind: click.ParamType[Any], what: str, code: int) -> Callable[[F], F]:
    """One of serve's back-pressure options (docs/http.md), with its environment variable."""
    env = "CONVEYOR_" + flag[2:].upper().replace("-", "_")
    return click.option(
        flag,
        type=kind,
        envvar=env,
        metavar="BYTES" if flag.endswith("bytes") else "MESSAGES",
        help=f"{what}; past it a send is refused whole with {code} (HTTP 429, retry-after). Env: {env}. "
        "Default: no limit.",
    )


@click.command("serve")
@click.option("--url", "serve_url", metavar="URL", help="The deployment (overrides the global --url / CONVEYOR_URL).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=int, help="Port to listen on.")
@click.option("--no-auth", is_flag=True, help="Accept requests without tokens (loopback addresses only).")
@click.option("--tokens-db", type=click.Path(dir_okay=False), help=TOKENS_DB_HELP)
@click.option("--log-json", is_flag=True, help="Write logs as JSON lines (each with its request id).")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    help="The least severe log lines written (debug: one access line per request too).",
)
@click.option(
    "--worker",
    "worker_apps",
    multiple=True,
    metavar="APP",
    callback=lambda ctx, param, value: _check_apps(value),
    help="Run this conveyor.App (module:attribute) here, and push consumers registered through the API "
    "whose script is one of its handlers (repeatable).",
)
@click.option(
    "--handlers",
    "handler_modules",
    multiple=True,
    metavar="MODULE",
    help="Run push consumers registered through the API whose script is a function defined in MODULE "
    "(module:function; repeatable). Nothing else is ever imported.",
)
@click.option(
    "--dev-token",
    metavar="ACCOUNT",
    help="Print the directory's development token for ACCOUNT (made once, kept in DIR/dev-token, owner-only).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=MAX_CONNECTIONS,
    show_default=True,
    help="Open connections at most; past it the one waiting longest for a request is closed.",
)
@click.option(
    "--head-timeout",
    type=click.FloatRange(min=0.1),
    default=HEAD_SECONDS,
    show_default=True,
    metavar="SECONDS",
    help="Time for a request head to arrive whole (else 408).",
)
@click.option(
    "--body-timeout",
    type=click.FloatRange(min=0.1),
    default=BODY_SECONDS,
    show_default=True,
    metavar="SECONDS",
    help="Time for a request body to arrive whole after its head (else 408).",
)
@click.option(
    "--keep-alive-timeout",
    type=click.IntRange(min=1),
    default=KEEP_ALIVE_SECONDS,
    show_default=True,
    metavar="SECONDS",
    help="How long an idle keep-alive connection stays open.",
)
@_queue_limit(
    "--max-send-rate",
    click.FloatRange(min=0, min_open=True),
    "Messages a second each queue takes at most (bursts of one second's worth)",
    10250,
)
@_queue_limit("--max-backlog", click.IntRange(min=1), "Messages each queue holds at most", 10251)
@_queue_limit("--max-queue-bytes", click.IntRange(min=1), "Bytes of message bodies each queue holds at most", 10251)
@click.option(
    "--history-interval",
    type=click.FloatRange(min=MIN_INTERVAL_SECONDS),
    default=DEFAULT_INTERVAL_SECONDS,
    show_default=True,
    metavar="SECONDS",
    help="How often the coordinator records each queue's figures for the dashboard and `queues info --history`.",
)
@click.option(
    "--history-hours",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_KEEP_SECONDS / 3600,
    show_default=True,
    metavar="HOURS",
    help="How long the queue history is kept.",
)
@egress_allow_option
@pass_state
def serve_command(
    state: CliState,
    serve_url: str | None,
    host: str,
    port: int,
    no_auth: bool,
    tokens_db: str | None,
    log_json: bool,
    log_level: str,
    worker_apps: tuple[str, ...],
    handler_modules: tuple[str, ...],
    dev_token: str | None,
    max_connections: int,
    head_timeout: float,
    body_timeout: float,
    keep_alive_timeout: int,
    max_send_rate: float | None,
    max_backlog: int | None,
    max_queue_bytes: int | None,
    history_interval: float,
    history_hours: float,
) -> None:
    """Serve the deployment over HTTP: Cloudflare's Queues REST API v4, /metrics, /openapi.json.

    \b
    conveyor serve --port 8787
    conveyor serve --url sqlite:///var/lib/conveyor --host 0.0.0.0
    conveyor serve --url postgresql://user@db/conveyor --host 0.0.0.0 --max-connections 5000
    conveyor serve --worker myapp.workers:app --handlers myapp.consumers

    A push consumer registered through the API (wrangler, REST, `conveyor queues consumer add`) runs
    here only if its script (module:function) is a handler of a --worker app or a function defined
    in a --handlers module; any other is kept as data and shows as "no worker for this script".
    Modules are imported with the current directory on the path; one that cannot load is reported
    and tried again every few seconds.
    """
    if no_auth:
        click.secho(
            "WARNING: --no-auth: no token is checked; anyone who can reach this address can read, send to, "
            "purge and delete every queue of every account.",
            fg="red",
            bold=True,
            err=True,
        )
    url = serve_url or state.url

    def ready(secret: str | None) -> None:
        click.echo(_where(host, port, secret, dev_token), err=False)

    serve(
        url,
        host=host,
        port=port,
        no_auth=no_auth,
        tokens=tokens_db,
        json_logs=log_json,
        log_level=getattr(logging, log_level.upper()),
        worker_apps=worker_apps,
        handler_modules=handler_modules,
        dev_token_account=None if no_auth else dev_token,
        on_ready=ready,
        limits=ConnectionLimits(head_seconds=head_timeout, body_seconds=body_timeout, max_connections=max_connections),
        keep_alive_seconds=keep_alive_timeout,
        queue_limits=QueueLimits(max_send_rate, max_backlog, max_queue_bytes),
        history=HistorySettings(history_interval, history_hours * 3600),
    )


@contextmanager
def deployment_tokens(url: str | None) -> Iterator[TokenStore]:
    """The token store of the deployment at ``url``; a server's URL is refused (its tokens are not
    reachable from here, and writing some elsewhere would print a token the server refuses)."""
    url = url or DEFAULT_URL
    if url.startswith(("http://", "https://")):
        raise CliError(NOT_A_DEPLOYMENT.format(url=url))
    engine = open_engine(url)
    try:
        store = open_token_store(engine)
        try:
            yield store
        finally:
            store.close()
    finally:
        engine.close()


@click.group("tokens")
def tokens_group() -> None:
    """API tokens of ``conveyor serve``, kept hashed in the deployment's catalog (``--url``), so every
    server of the deployment accepts them. Run these where the deployment is (its SQLite directory
    or its PostgreSQL database), not against a server's http:// URL."""


@tokens_group.command("create")
@click.option("--account", help="The account the token answers for.")
@click.option("--read-only", is_flag=True, help="Only GET requests and peek.")
@click.option("--queue", "queues", multiple=True, metavar="NAME", help="Limit the token to this queue (repeatable).")
@click.option("--operator", is_flag=True, help="An operator token: /metrics of every account, nothing else.")
@pass_state
def create_token(
    state: CliState, account: str | None, read_only: bool, queues: tuple[str, ...], operator: bool
) -> None:
    """Create a token; the secret is printed once, alone on the last line.

    \b
    conveyor --url sqlite:///var/lib/conveyor tokens create --account acc1
    conveyor tokens create --account acc1 --queue emails --read-only
    conveyor tokens create --operator            # for Prometheus: /metrics of every account
    """
    if operator and (account or read_only or queues):
        raise CliError("an operator token answers for no account: give --operator alone")
    if not operator and not account:
        raise CliError("give --account ACCOUNT (or --operator for a token that reads every account's metrics)")
    with deployment_tokens(state.url) as store:
        if operator:
            secret, token = store.create_operator()
        else:
            assert account is not None
            secret, token = store.create(account, read_only=read_only, queues=queues)
    click.echo(f"token {token.token_id} {_scope(token)}")
    click.echo(secret)


def _scope(token: Token) -> str:
    if token.operator:
        return "(operator: /metrics of every account)"
    scope = ", ".join(token.queues) if token.queues else "every queue"
    return f"for account {token.account_id} ({'read-only' if token.read_only else 'read-write'}, {scope})"


@tokens_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def list_tokens(state: CliState, as_json: bool) -> None:
    """List tokens (ids and scopes; secrets are never stored)."""
    with deployment_tokens(state.url) as store:
        tokens = store.list()
    rows: list[dict[str, Any]] = [
        {
            "token_id": t.token_id,
            "account_id": t.account_id,
            "read_only": t.read_only,
            "queues": list(t.queues),
            "operator": t.operator,
            "created_on": t.created_on,
        }
        for t in tokens
    ]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        scope = ",".join(r["queues"]) or "*"
        kind = "operator" if r["operator"] else ("ro" if r["read_only"] else "rw")
        click.echo(f"{r['token_id']}  {r['account_id'] or '-'}  {kind}  {scope}  {r['created_on']}")


@tokens_group.command("revoke")
@click.argument("token_id")
@pass_state
def revoke_token(state: CliState, token_id: str) -> None:
    """Revoke a token by its id (see ``conveyor tokens list``); servers refuse it within a second."""
    with deployment_tokens(state.url) as store:
        if not store.revoke(token_id):
            raise CliError(f"no token with id {token_id!r}")
    click.echo(f"revoked {token_id}")


COMMANDS = (serve_command, tokens_group)
