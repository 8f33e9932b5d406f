"""``conveyor slurper ...``: Super Slurper's migration jobs (``jobs create|list|get|pause|resume|abort|
abort-all|progress|logs``) and a worker that runs their pipeline (``slurper worker``).

A source or target is given as JSON, inline or from a file (``--source @source.json``): a file
keeps the secret out of the process list and the shell's history. ``jobs progress --watch`` (and
``jobs create --wait``) shows a live bar of objects and bytes with their rate and ETA, as rclone and
s5cmd do; ``--json`` prints the wire's shapes instead (one JSON line per change while watching).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import msgspec
from rich.progress import (
    BarColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table
from rich.text import Text

from conveyor.cli.context import CliError, CliState, ConveyorGroup, console, emit, json_option, pass_state
from conveyor.slurper import Job, JobProgress, PlannedObject
from conveyor.slurper.endpoints import MAX_PUT_BYTES, MIN_PART_SIZE, MULTIPART_THRESHOLD, PART_SIZE
from conveyor.slurper.model import LOG_TYPES, iso
from conveyor.wire import slurper as shapes

if TYPE_CHECKING:
    from conveyor.slurper.remote import RemoteJob

FINISHED = ("completed", "aborted")
POLL_SECONDS = 0.5


@click.group("slurper", cls=ConveyorGroup, short_help="Migrate buckets into Conveyor (Super Slurper).")
def slurper_group() -> None:
    """Migration jobs from any S3-compatible bucket into a Conveyor bucket (docs/slurper.md)."""


@slurper_group.group("jobs", cls=ConveyorGroup, short_help="Create, follow and control migration jobs.")
def jobs_group() -> None:
    """Create, list, follow, pause, resume and abort migration jobs."""


def _spec(text: str, option: str) -> dict[str, Any]:
    raw = text
    if text.startswith("@"):
        try:
            raw = Path(text[1:]).read_text()
        except OSError as exc:
            raise CliError(f"{option}: cannot read {text[1:]}: {exc.strerror}") from None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise CliError(f"{option} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise CliError(f'{option} must be a JSON object such as {{"vendor": "r2", "bucket": "photos"}}')
    return value


def _wire(value: msgspec.Struct) -> Any:
    return msgspec.to_builtins(value)


def _done(p: JobProgress) -> int:
    return p.transferred_objects + p.skipped_objects + p.failed_objects


def watch(job: Job | RemoteJob, as_json: bool) -> JobProgress:
    """Follow ``job`` until it is completed or aborted (Ctrl-C stops watching, not the job)."""
    if as_json:
        last = None
        while True:
            p = job.progress()
            line = json.dumps(_wire(shapes.progress(p)))
            if line != last:
                click.echo(line)
                last = line
            if p.status in FINISHED:
                return p
            time.sleep(POLL_SECONDS)
    err = console(stderr=True)
    bars = Progress(
        TextColumn("[progress.description]{task.description:<8}"),
        BarColumn(bar_width=36),
        TextColumn("{task.fields[count]}"),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}"),
        console=err,
        refresh_per_second=8,
    )
    with bars:
        p = job.progress()
        objects = bars.add_task("objects", total=None, count="", status="")
        data = bars.add_task("bytes", total=None, count="", status="")
        while True:
            finished = p.status in FINISHED
            total = p.objects if p.listing_finished else None
            bars.update(
                objects,
                completed=_done(p),
                total=total,
                count=f"{_done(p):,}/{p.objects:,}{'' if p.listing_finished else '+'} "
                f"({p.skipped_objects:,} skipped, {p.failed_objects:,} failed)",
                status=p.status,
            )
            bars.update(
                data,
                completed=p.transferred_bytes,
                total=p.listed_bytes if p.listing_finished else None,
                count=f"{p.transferred_bytes:,} B",
                status="",
            )
            if finished:
                return p
            time.sleep(POLL_SECONDS)
            p = job.progress()


@jobs_group.command("create")
@click.option("--source", "source", required=True, metavar="JSON|@FILE", help="The source bucket (the wire's fields).")
@click.option("--target", "target", required=True, metavar="JSON|@FILE", help="The target bucket.")
@click.option("--skip-existing", is_flag=True, help="Skip keys the target already holds (default: overwrite).")
@click.option("--wait", is_flag=True, help="Follow the job until it ends (a worker must run its pipeline).")
@click.option("--dry-run", is_flag=True, help="List what the job would copy and skip; create nothing.")
@json_option
@pass_state
def create(
    state: CliState, source: str, target: str, skip_existing: bool, wait: bool, dry_run: bool, as_json: bool
) -> None:
    """Create a migration job; its source and target are reached first."""
    cv = state.connect()
    if dry_run:
        _dry_run(cv.slurper.plan(_spec(source, "--source"), _spec(target, "--target"), not skip_existing), as_json)
        return
    job = cv.slurper.create_job(_spec(source, "--source"), _spec(target, "--target"), overwrite=not skip_existing)
    emit(as_json, {"id": job.id}, lambda: Text.assemble("Created migration job ", (job.id, "bold cyan")))
    if wait:
        _report(watch(job, as_json), as_json)


def _dry_run(planned: Iterator[PlannedObject], as_json: bool) -> None:
    found = list(planned)
    copies = [p for p in found if p.action == "copy"]
    summary = {
        "copy": len(copies),
        "skip": len(found) - len(copies),
        "bytes": sum(max(p.size, 0) for p in copies),
        "objects": [{"key": p.key, "size": p.size, "action": p.action, "reason": p.reason} for p in found],
    }

    def table() -> Table:
        out = Table(
            "action",
            "key",
            "size",
            "why",
            title=f"would copy {len(copies):,} objects ({summary['bytes']:,} B), skip {summary['skip']:,}",
        )
        for p in found:
            out.add_row(p.action, p.key, "?" if p.size < 0 else f"{p.size:,}", p.reason)
        return out

    emit(as_json, summary, table)


def _report(p: JobProgress, as_json: bool) -> None:
    if as_json:
        return
    console().print(
        Text.assemble(
            f"Job {p.id} {p.status}: {p.objects:,} objects, {p.transferred_objects:,} transferred, ",
            f"{p.skipped_objects:,} skipped, ",
            (f"{p.failed_objects:,} failed", "bold red" if p.failed_objects else ""),
        )
    )


@jobs_group.command("list")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@json_option
@pass_state
def list_jobs(state: CliState, limit: int, offset: int, as_json: bool) -> None:
    """The account's migration jobs, newest first."""
    found = state.connect().slurper.list_jobs(limit, offset)

    def table() -> Table:
        out = Table("id", "status", "source", "target", "created")
        for info in found:
            source = f"{info.source['vendor']}:{info.source['bucket']}/{info.source.get('pathPrefix') or ''}"
            out.add_row(
                info.id,
                info.status,
                source,
                f"{info.target['vendor']}:{info.target['bucket']}",
                iso(info.created_at),
            )
        return out

    emit(as_json, [_wire(shapes.job(info)) for info in found], table)


@jobs_group.command("get")
@click.argument("job_id")
@json_option
@pass_state
def get(state: CliState, job_id: str, as_json: bool) -> None:
    """One job: its status, source and target (never a secret)."""
    info = state.connect().slurper.job(job_id).info()
    emit(as_json, _wire(shapes.job(info)), lambda: json.dumps(_wire(shapes.job(info)), indent=2, ensure_ascii=False))


@jobs_group.command("progress")
@click.argument("job_id")
@click.option("--watch", "follow", is_flag=True, help="Follow it with a live bar until it ends.")
@json_option
@pass_state
def progress(state: CliState, job_id: str, follow: bool, as_json: bool) -> None:
    """How far the job is: objects listed, transferred, skipped and failed."""
    job = state.connect().slurper.job(job_id)
    if follow:
        _report(watch(job, as_json), as_json)
        return
    p = job.progress()
    emit(as_json, _wire(shapes.progress(p)), lambda: _summary(p))


def _summary(p: JobProgress) -> Text:
    listed = "" if p.listing_finished else " (listing)"
    return Text.assemble(
        (p.status, "bold"),
        f"{listed}: {p.objects:,} objects, {p.transferred_objects:,} transferred ({p.transferred_bytes:,} B), "
        f"{p.skipped_objects:,} skipped, {p.failed_objects:,} failed",
    )


@jobs_group.command("logs")
@click.argument("job_id")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@click.option("--type", "log_type", type=click.Choice(LOG_TYPES), help="Only the entries of this log type.")
@json_option
@pass_state
def logs(state: CliState, job_id: str, limit: int, offset: int, log_type: str | None, as_json: bool) -> None:
    """The job's log entries, oldest first (only one type's with --type)."""
    found = state.connect().slurper.job(job_id).logs(limit, offset, log_type=log_type)

    def table() -> Table:
        out = Table("time", "type", "key", "message")
        for entry in found:
            out.add_row(iso(entry.created_at), entry.log_type, entry.object_key or "", entry.message)
        return out

    emit(as_json, [_wire(shapes.log(entry)) for entry in found], table)


def _change(state: CliState, job_id: str, action: str, as_json: bool) -> None:
    job = state.connect().slurper.job(job_id)
    info = getattr(job, action)()
    emit(as_json, _wire(shapes.job(info)), lambda: Text.assemble("Job ", (job_id, "bold cyan"), f" is {info.status}"))


@jobs_group.command("pause")
@click.argument("job_id")
@json_option
@pass_state
def pause(state: CliState, job_id: str, as_json: bool) -> None:
    """Stop starting transfers (those under way finish)."""
    _change(state, job_id, "pause", as_json)


@jobs_group.command("resume")
@click.argument("job_id")
@json_option
@pass_state
def resume(state: CliState, job_id: str, as_json: bool) -> None:
    """Go on with a paused job."""
    _change(state, job_id, "resume", as_json)


@jobs_group.command("abort")
@click.argument("job_id")
@json_option
@pass_state
def abort(state: CliState, job_id: str, as_json: bool) -> None:
    """End the job for good (what is copied stays)."""
    _change(state, job_id, "abort", as_json)


@jobs_group.command("abort-all")
@json_option
@pass_state
def abort_all(state: CliState, as_json: bool) -> None:
    """Abort every running or paused job of the account."""
    count = state.connect().slurper.abort_all()
    emit(as_json, {"aborted": count}, lambda: f"Aborted {count} jobs")


@slurper_group.command("worker", short_help="Run the migration pipeline's consumers.")
@click.option("--max-object-bytes", type=click.IntRange(1), default=None, help="Skip larger objects (default 1 TB).")
@click.option("--max-retries", type=click.IntRange(0, 100), default=3, show_default=True)
@click.option(
    "--visibility-timeout-ms",
    type=click.IntRange(1000, 12 * 3600 * 1000),
    default=30_000,
    show_default=True,
    help="How soon a dead worker's messages come back.",
)
@click.option("--max-bytes-per-second", type=click.IntRange(1), default=None, help="Read at most this from sources.")
@click.option(
    "--multipart-threshold",
    type=click.IntRange(0, MAX_PUT_BYTES),
    default=MULTIPART_THRESHOLD,
    show_default=True,
    help="Bytes: an S3 target takes larger objects as multipart uploads, smaller ones in one streamed PUT.",
)
@click.option(
    "--part-size",
    type=click.IntRange(MIN_PART_SIZE, MAX_PUT_BYTES),
    default=PART_SIZE,
    show_default=True,
    help="Bytes per part of a multipart upload (larger when an object needs more than 10,000 parts).",
)
@pass_state
def worker(
    state: CliState,
    max_object_bytes: int | None,
    max_retries: int,
    visibility_timeout_ms: int,
    max_bytes_per_second: int | None,
    multipart_threshold: int,
    part_size: int,
) -> None:
    """Run the list, transfer and lifecycle consumers of the account's jobs until SIGINT/SIGTERM."""
    import conveyor
    from conveyor.slurper.pipeline import add_consumers
    from conveyor.slurper.rules import MAX_OBJECT_BYTES

    app = conveyor.App(state.connect())
    pipeline = add_consumers(
        app,
        max_retries=max_retries,
        max_object_bytes=max_object_bytes or MAX_OBJECT_BYTES,
        visibility_timeout_ms=visibility_timeout_ms,
        max_bytes_per_second=max_bytes_per_second,
        multipart_threshold=multipart_threshold,
        part_size=part_size,
    )
    try:
        app.run()
    finally:
        pipeline.close()
