"""``conveyor serve`` (the HTTP service) and ``conveyor tokens`` (its API tokens)."""

from __future__ import annotations

import json
from typing import Any

import click

from conveyor.cli.context import CliState, pass_state
from conveyor.server.serve import DEFAULT_PORT, serve, token_store

TOKENS_DB_HELP = "The tokens database (default: tokens.db in the deployment's directory)."


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


@click.command("serve")
@click.option("--url", "serve_url", metavar="URL", help="The deployment (overrides the global --url / CONVEYOR_URL).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=int, help="Port to listen on.")
@click.option("--no-auth", is_flag=True, help="Accept requests without tokens (loopback addresses only).")
@click.option("--tokens-db", type=click.Path(dir_okay=False), help=TOKENS_DB_HELP)
@click.option("--log-json", is_flag=True, help="Write logs as JSON lines (each with its request id).")
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
@click.option("--dev-token", metavar="ACCOUNT", help="Create a token for ACCOUNT at start and print it.")
@pass_state
def serve_command(
    state: CliState,
    serve_url: str | None,
    host: str,
    port: int,
    no_auth: bool,
    tokens_db: str | None,
    log_json: bool,
    worker_apps: tuple[str, ...],
    handler_modules: tuple[str, ...],
    dev_token: str | None,
) -> None:
    """Serve the deployment over HTTP: Cloudflare's Queues REST API v4, /metrics, /openapi.json.

    \b
    conveyor serve --port 8787
    conveyor serve --url sqlite:///var/lib/conveyor --host 0.0.0.0
    conveyor serve --url postgresql://user@db/conveyor --tokens-db /etc/conveyor/tokens.db
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
    secret = None
    if dev_token and not no_auth:
        store = token_store(url, tokens_db)
        secret = store.create(dev_token)[0]
        store.close()

    def ready() -> None:
        click.echo(_where(host, port, secret, dev_token), err=False)

    serve(
        url,
        host=host,
        port=port,
        no_auth=no_auth,
        tokens=tokens_db,
        json_logs=log_json,
        worker_apps=worker_apps,
        handler_modules=handler_modules,
        on_ready=ready,
    )


@click.group("tokens")
def tokens_group() -> None:
    """API tokens of ``conveyor serve``: stored hashed, each scoped to one account."""


@tokens_group.command("create")
@click.option("--account", required=True, help="The account the token answers for.")
@click.option("--read-only", is_flag=True, help="Only GET requests and peek.")
@click.option("--queue", "queues", multiple=True, metavar="NAME", help="Limit the token to this queue (repeatable).")
@click.option("--tokens-db", type=click.Path(dir_okay=False), help=TOKENS_DB_HELP)
@pass_state
def create_token(
    state: CliState, account: str, read_only: bool, queues: tuple[str, ...], tokens_db: str | None
) -> None:
    """Create a token; the secret is printed once, alone on the last line."""
    store = token_store(state.url, tokens_db)
    try:
        secret, token = store.create(account, read_only=read_only, queues=queues)
    finally:
        store.close()
    scope = ", ".join(queues) if queues else "every queue"
    click.echo(f"token {token.token_id} for account {account} ({'read-only' if read_only else 'read-write'}, {scope})")
    click.echo(secret)


@tokens_group.command("list")
@click.option("--tokens-db", type=click.Path(dir_okay=False), help=TOKENS_DB_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def list_tokens(state: CliState, tokens_db: str | None, as_json: bool) -> None:
    """List tokens (ids and scopes; secrets are never stored)."""
    store = token_store(state.url, tokens_db)
    try:
        tokens = store.list()
    finally:
        store.close()
    rows: list[dict[str, Any]] = [
        {
            "token_id": t.token_id,
            "account_id": t.account_id,
            "read_only": t.read_only,
            "queues": list(t.queues),
            "created_on": t.created_on,
        }
        for t in tokens
    ]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        scope = ",".join(r["queues"]) or "*"
        click.echo(
            f"{r['token_id']}  {r['account_id']}  {'ro' if r['read_only'] else 'rw'}  {scope}  {r['created_on']}"
        )


@tokens_group.command("revoke")
@click.argument("token_id")
@click.option("--tokens-db", type=click.Path(dir_okay=False), help=TOKENS_DB_HELP)
@pass_state
def revoke_token(state: CliState, token_id: str, tokens_db: str | None) -> None:
    """Revoke a token by its id (see ``conveyor tokens list``)."""
    store = token_store(state.url, tokens_db)
    try:
        if not store.revoke(token_id):
            raise click.ClickException(f"no token with id {token_id!r}")
    finally:
        store.close()
    click.echo(f"revoked {token_id}")


COMMANDS = (serve_command, tokens_group)
