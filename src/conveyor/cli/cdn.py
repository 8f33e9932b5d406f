"""``conveyor cdn ...``: the package CDN (docs/cdn.md) — ``init`` and ``status`` of the account's CDN,
``add`` package configs, ``update`` (one PackageUpdatesWorkflow now; ``--wait`` runs the pipeline's
workflows in this process until it and its downloads and publishes have ended), ``compressor`` (a
compression worker process: run one per core, on any machine of the deployment), ``serve`` (the
files and the libraries API), ``import`` (an existing ``ajax/libs`` tree) and ``audit``."""

from __future__ import annotations

import json
from typing import Any

import click

import conveyor
from conveyor.cdn import client
from conveyor.cdn.compression import add_compressor
from conveyor.cdn.config import DEFAULT_CRON, DEFAULT_REGISTRY
from conveyor.cli.context import CliError, CliState, ConveyorGroup, emit, json_option, pass_state


@click.group("cdn", cls=ConveyorGroup, short_help="The package CDN (cdnjs's pipeline).")
def cdn_group() -> None:
    """A cdnjs-compatible package CDN on Conveyor's workflows and buckets (docs/cdn.md)."""


def _lines(data: dict[str, Any]) -> str:
    return "\n".join(
        f"{key}: {json.dumps(value) if isinstance(value, dict | list) else value}" for key, value in data.items()
    )


@cdn_group.command("init")
@click.option("--primary", default="cdn", show_default=True, help="The primary bucket (made if missing).")
@click.option("--primary-url", default=None, help="Where a new primary bucket lives (file:// or s3://).")
@click.option("--staging", default="cdn-staging", show_default=True, help="The staging bucket (made if missing).")
@click.option("--staging-url", default=None, help="Where a new staging bucket lives.")
@click.option("--staging-days", default=7, show_default=True, help="Days a staged tarball is kept.")
@click.option("--mirror", default=None, help="An existing bucket mirroring the primary (e.g. S3-compatible).")
@click.option("--registry", default=DEFAULT_REGISTRY, show_default=True, help="The npm registry's base URL.")
@click.option("--cron", default=DEFAULT_CRON, show_default=True, help="When PackageUpdatesWorkflow runs (UTC).")
@click.option("--public-account", default=None, help="The account `cdn serve` serves (default: this one).")
@json_option
@pass_state
def init(state: CliState, /, as_json: bool, **options: Any) -> None:
    """Make the account's CDN (again: shows it as it is)."""
    client.init(state.connect(), **options)
    shown = client.status(state.connect())
    emit(as_json, shown, lambda: _lines(shown))


@cdn_group.command("status")
@json_option
@pass_state
def status(state: CliState, as_json: bool) -> None:
    """The account's CDN: buckets, registry, cron, packages and versions by state."""
    shown = client.status(state.connect())
    emit(as_json, shown, lambda: _lines(shown))


@cdn_group.command("add")
@click.argument("path", type=click.Path(exists=True))
@json_option
@pass_state
def add(state: CliState, path: str, as_json: bool) -> None:
    """Add the package configs of FILE or of a DIR's packages/<letter>/<name>.json (all or none)."""
    names = client.add(state.connect(), path)
    emit(as_json, {"added": names}, lambda: f"added {len(names)} package(s): {', '.join(names)}")


@cdn_group.command("update")
@click.option("--registry", default=None, help="Ask this registry instead of the CDN's.")
@click.option("--package", default=None, help="Only this package.")
@click.option("--wait", is_flag=True, help="Run the workflows here until every new version is published or failed.")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds --wait waits.")
@json_option
@pass_state
def update(
    state: CliState, registry: str | None, package: str | None, wait: bool, timeout: float, as_json: bool
) -> None:
    """Start one PackageUpdatesWorkflow now."""
    cv = state.connect()
    if not wait:
        instance_id = client.update(cv, registry=registry, package=package)
        emit(as_json, {"instance": instance_id}, lambda: f"started {instance_id}")
        return
    try:
        result = client.update_and_wait(cv, registry=registry, package=package, timeout=timeout)
    except TimeoutError as exc:
        raise CliError(str(exc)) from None
    emit(as_json, result, lambda: _lines(result))
    if result.get("failed") or any(s == "failed" for s in result["versions"].values()):
        raise click.exceptions.Exit(1)


@cdn_group.command("compressor")
@click.option(
    "--visibility-timeout",
    type=click.FloatRange(1, 43_200),
    default=30.0,
    show_default=True,
    help="Seconds the job of a compressor that died stays held before another compressor takes it.",
)
@click.option(
    "--grace",
    type=click.FloatRange(0, 3_600),
    default=30.0,
    show_default=True,
    help="Seconds a job may take to finish on SIGTERM.",
)
@pass_state
def compressor(state: CliState, visibility_timeout: float, grace: float) -> None:
    """Run a compression worker until SIGINT/SIGTERM: brotli 11 and gzip 9 next to each staged file,
    one file at a time (run more processes for more cores, on any machine of the deployment)."""
    app = conveyor.App(state.connect(), grace_period=grace)
    add_compressor(app, visibility_timeout_ms=int(visibility_timeout * 1000))
    app.run()


@cdn_group.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", default=8788, show_default=True, help="The port to listen on (0: any free one).")
@click.option("--cache-mb", default=256, show_default=True, help="MiB of file bodies kept in memory (per process).")
@click.option("--processes", default=1, show_default=True, help="Processes answering on the port (one per core).")
@pass_state
def serve(state: CliState, host: str, port: int, cache_mb: int, processes: int) -> None:
    """Serve /ajax/libs/{name}/{version}/{path} and the /libraries API of the account's CDN."""
    from conveyor.cdn.server import serve as run_server

    def ready(bound: int) -> None:
        click.echo(f"serving the CDN on http://{host}:{bound}", err=True)

    cache_bytes = cache_mb * 1024 * 1024
    run_server(state.connect(), host=host, port=port, cache_bytes=cache_bytes, processes=processes, on_ready=ready)


@cdn_group.command("import")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--timeout", default=3600.0, show_default=True, help="Seconds to wait for every package.")
@json_option
@pass_state
def import_(state: CliState, directory: str, timeout: float, as_json: bool) -> None:
    """Copy an existing ajax/libs/{name}/{version}/... tree byte for byte into the CDN."""
    from conveyor.cdn.importer import import_tree

    try:
        result = import_tree(state.connect(), directory, timeout=timeout)
    except TimeoutError as exc:
        raise CliError(str(exc)) from None
    emit(as_json, result, lambda: _lines(result))
    if result["failed"]:
        raise click.exceptions.Exit(1)


@cdn_group.command("audit")
@click.option("--repair", is_flag=True, help="Write the published bytes back where a bucket diverges.")
@json_option
@pass_state
def audit(state: CliState, repair: bool, as_json: bool) -> None:
    """Check every published file of KV in the primary and the mirror (presence, size, SHA-512)."""
    from conveyor.cdn.audit import audit as run_audit

    report = run_audit(state.connect(), repair=repair)
    shown = report.as_dict()

    def text() -> str:
        lines = [f"objects: {report.objects}"]
        lines += [f"{bucket} {outcome}: {n}" for (bucket, outcome), n in sorted(report.counts.items())]
        lines += [
            f"{d.bucket}/{d.key}: {d.problem}" + (" (repaired)" if d.repaired else "") for d in report.divergences
        ]
        return "\n".join(lines)

    emit(as_json, shown, text)
    if any(not d.repaired for d in report.divergences):
        raise click.exceptions.Exit(1)


@cdn_group.command("run")
@click.option("--host", default="127.0.0.1", show_default=True, help="The address cdn serve listens on.")
@click.option("--port", default=8788, show_default=True, help="The port to serve on (0: any free one).")
@click.option(
    "--compressors",
    type=click.IntRange(0, 64),
    default=None,
    help="Compressor processes (default: one per core; 0: none here, they run elsewhere).",
)
@click.option("--processes", type=click.IntRange(1, 64), default=1, show_default=True, help="Serving processes.")
@click.option("--cache-mb", default=256, show_default=True, help="MiB of file bodies kept in memory (per process).")
@click.option(
    "--update-now/--no-update-now",
    default=True,
    show_default=True,
    help="Check every package for new versions at once, besides on the cron.",
)
@click.option(
    "--visibility-timeout",
    type=click.FloatRange(1, 43_200),
    default=30.0,
    show_default=True,
    help="Seconds the work of a process that died stays held before another takes it up.",
)
@pass_state
def run(
    state: CliState,
    host: str,
    port: int,
    compressors: int | None,
    processes: int,
    cache_mb: int,
    update_now: bool,
    visibility_timeout: float,
) -> None:
    """Run the whole CDN until SIGINT/SIGTERM: its workflows (the update on its cron, downloads,
    processing, publishing), compressor processes and the server (files and the libraries API)."""
    from conveyor.cdn.runner import default_compressors
    from conveyor.cdn.runner import run as run_cdn

    count = default_compressors() if compressors is None else compressors

    def ready(bound: int) -> None:
        click.echo(f"serving the CDN on http://{host}:{bound} ({count} compressor(s); stop with Ctrl-C)", err=True)

    run_cdn(
        state.connect(),
        host=host,
        port=port,
        compressors=count,
        processes=processes,
        cache_bytes=cache_mb * 1024 * 1024,
        update_now=update_now,
        visibility_timeout=visibility_timeout,
        on_ready=ready,
    )
