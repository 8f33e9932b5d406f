"""``conveyor migrate``: bring a PostgreSQL deployment's schema up to date."""

from __future__ import annotations

import click

from conveyor.cli.context import CliState, emit, json_option, pass_state
from conveyor.client.connect import DEFAULT_URL


@click.command("migrate", short_help="Apply pending schema migrations (PostgreSQL).")
@json_option
@pass_state
def migrate(state: CliState, as_json: bool) -> None:
    """Apply the PostgreSQL schema migrations this Conveyor ships and the database lacks.

    Engines also migrate on first connect; run this ahead of a rollout so that no worker waits on
    it. SQLite deployments need nothing: their files are created current.

    \b
    conveyor --url postgresql://db.internal/conveyor migrate
    """
    url = state.url or DEFAULT_URL
    if not url.startswith(("postgresql://", "postgres://")):
        emit(as_json, {"applied": []}, lambda: "nothing to migrate: only PostgreSQL deployments have migrations")
        return
    from conveyor.engine.postgres import migrate as apply_migrations

    applied = apply_migrations(url)
    emit(
        as_json,
        {"applied": applied},
        lambda: f"applied migrations {', '.join(map(str, applied))}" if applied else "the schema is up to date",
    )
