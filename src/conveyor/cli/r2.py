"""``conveyor r2 ...``, shaped like wrangler's: buckets, their notification and lifecycle rules,
and objects (``BUCKET/KEY``), with progress bars for large transfers and ``--json``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import click
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn
from rich.table import Table

from conveyor.cli.context import CliError, CliState, ConveyorGroup, console, emit, json_option, pass_state
from conveyor.storage.model import ACTION_GROUPS, BucketInfo, LifecycleRule, NotificationRule, ObjectInfo

# Transfers larger than this show a progress bar (on stderr, when it is a terminal).
PROGRESS_BYTES = 8 * 1024 * 1024
CHUNK = 1024 * 1024


@click.group("r2", cls=ConveyorGroup, short_help="Manage buckets and objects (R2's commands).")
def r2_group() -> None:
    """Buckets, their event notifications and lifecycle rules, and objects, as wrangler's `r2`."""


@r2_group.group("bucket", cls=ConveyorGroup)
def bucket_group() -> None:
    """Create, list and delete buckets; their notification and lifecycle rules."""


@r2_group.group("object", cls=ConveyorGroup)
def object_group() -> None:
    """Put, get and delete objects, named BUCKET/KEY."""


def _bucket_json(b: BucketInfo) -> dict[str, Any]:
    return {
        "name": b.name,
        "location": b.location,
        "url": b.url,
        "endpoint": b.endpoint,
        "region": b.region,
        "created": b.created.isoformat(),
    }


def _object_json(o: ObjectInfo) -> dict[str, Any]:
    return {
        "key": o.key,
        "size": o.size,
        "etag": o.etag,
        "sha256": o.sha256,
        "content_type": o.content_type,
        "metadata": dict(o.metadata),
        "uploaded": o.uploaded.isoformat(),
    }


def _rule_json(r: NotificationRule) -> dict[str, Any]:
    return {
        "rule_id": r.rule_id,
        "queue": r.queue,
        "actions": list(r.actions),
        "prefix": r.prefix,
        "suffix": r.suffix,
        "description": r.description,
        "created": r.created.isoformat(),
    }


def _lifecycle_json(r: LifecycleRule) -> dict[str, Any]:
    return {
        "rule_id": r.rule_id,
        "prefix": r.prefix,
        "max_age_seconds": r.max_age_seconds,
        "created": r.created.isoformat(),
    }


# -- buckets ------------------------------------------------------------------------------------
@bucket_group.command("create")
@click.argument("name")
@click.option("--s3-url", metavar="s3://BUCKET/PREFIX", help="Keep the objects in an S3-compatible service.")
@click.option("--endpoint", metavar="URL", help="The S3-compatible service's endpoint (omit for AWS).")
@click.option("--region", help="The service's region.")
@click.option("--access-key-id", envvar="CONVEYOR_S3_ACCESS_KEY_ID", help="Env: CONVEYOR_S3_ACCESS_KEY_ID.")
@click.option(
    "--secret-access-key",
    envvar="CONVEYOR_S3_SECRET_ACCESS_KEY",
    help="Env: CONVEYOR_S3_SECRET_ACCESS_KEY (prefer it: a command line shows in process lists).",
)
@json_option
@pass_state
def bucket_create(
    state: CliState,
    name: str,
    s3_url: str | None,
    endpoint: str | None,
    region: str | None,
    access_key_id: str | None,
    secret_access_key: str | None,
    as_json: bool,
) -> None:
    """Create the bucket NAME: a directory of the deployment, or with --s3-url an existing bucket of
    an S3-compatible service (its credentials are kept in the deployment, never shown)."""
    b = state.connect().create_bucket(
        name,
        url=s3_url,
        endpoint=endpoint,
        region=region,
        access_key_id=access_key_id,
        secret_access_key=secret_access_key,
    )
    emit(as_json, _bucket_json(b.info), lambda: f"Created bucket {b.name} ({b.info.location})")


@bucket_group.command("list")
@json_option
@pass_state
def bucket_list(state: CliState, as_json: bool) -> None:
    """List the account's buckets."""
    buckets = state.connect().list_buckets()

    def table() -> Table:
        t = Table("name", "location", "url", "created")
        for b in buckets:
            t.add_row(b.name, b.location, b.url or "-", b.created.strftime("%Y-%m-%d %H:%M:%S"))
        return t

    emit(as_json, [_bucket_json(b) for b in buckets], table)


@bucket_group.command("delete")
@click.argument("name")
@json_option
@pass_state
def bucket_delete(state: CliState, name: str, as_json: bool) -> None:
    """Delete the empty bucket NAME with its rules."""
    state.connect().delete_bucket(name)
    emit(as_json, {"deleted": name}, lambda: f"Deleted bucket {name}")


@bucket_group.group("notification", cls=ConveyorGroup)
def notification_group() -> None:
    """A bucket's event notification rules (R2's message into a queue)."""


@notification_group.command("create")
@click.argument("bucket")
@click.option(
    "--event-type",
    "event_types",
    multiple=True,
    required=True,
    type=click.Choice(
        [*ACTION_GROUPS, "PutObject", "CopyObject", "CompleteMultipartUpload", "DeleteObject", "LifecycleDeletion"]
    ),
    help="object-create, object-delete, or an action (repeatable).",
)
@click.option("--queue", required=True, help="The queue the messages go to.")
@click.option("--prefix", default="", help="Only keys with this prefix.")
@click.option("--suffix", default="", help="Only keys with this suffix.")
@click.option("--description", default="", help="What the rule is for.")
@json_option
@pass_state
def notification_create(
    state: CliState,
    bucket: str,
    event_types: tuple[str, ...],
    queue: str,
    prefix: str,
    suffix: str,
    description: str,
    as_json: bool,
) -> None:
    """Send R2's event message to --queue for the writes to BUCKET that match."""
    rule = state.connect().bucket(bucket).add_notification(queue, list(event_types), prefix, suffix, description)
    emit(as_json, _rule_json(rule), lambda: f"Created rule {rule.rule_id}: {', '.join(rule.actions)} → {queue}")


@notification_group.command("list")
@click.argument("bucket")
@json_option
@pass_state
def notification_list(state: CliState, bucket: str, as_json: bool) -> None:
    """List BUCKET's notification rules."""
    rules = state.connect().bucket(bucket).notifications()

    def table() -> Table:
        t = Table("rule", "queue", "actions", "prefix", "suffix", "description")
        for r in rules:
            t.add_row(r.rule_id, r.queue, ", ".join(r.actions), r.prefix, r.suffix, r.description)
        return t

    emit(as_json, [_rule_json(r) for r in rules], table)


@notification_group.command("delete")
@click.argument("bucket")
@click.option("--queue", help="Remove every rule of this queue.")
@click.option("--rule", "rule_id", help="Remove this rule only.")
@json_option
@pass_state
def notification_delete(state: CliState, bucket: str, queue: str | None, rule_id: str | None, as_json: bool) -> None:
    """Remove one rule (--rule) or every rule of a queue (--queue) of BUCKET."""
    if (queue is None) == (rule_id is None):
        raise CliError("give --rule ID or --queue NAME")
    b = state.connect().bucket(bucket)
    ids = [rule_id] if rule_id is not None else [r.rule_id for r in b.notifications() if r.queue == queue]
    for one in ids:
        b.remove_notification(one)
    emit(as_json, {"removed": ids}, lambda: f"Removed {len(ids)} rule(s) of bucket {bucket}")


@bucket_group.group("lifecycle", cls=ConveyorGroup)
def lifecycle_group() -> None:
    """A bucket's lifecycle rules: objects under a prefix deleted at an age."""


@lifecycle_group.command("add")
@click.argument("bucket")
@click.option("--expire-days", type=click.IntRange(min=1), help="Delete objects this many days old.")
@click.option("--expire-seconds", type=click.IntRange(min=1), help="... or this many seconds old.")
@click.option("--prefix", default="", help="Only keys with this prefix.")
@json_option
@pass_state
def lifecycle_add(
    state: CliState, bucket: str, expire_days: int | None, expire_seconds: int | None, prefix: str, as_json: bool
) -> None:
    """Delete BUCKET's objects under --prefix once they are old enough (LifecycleDeletion)."""
    if (expire_days is None) == (expire_seconds is None):
        raise CliError("give --expire-days or --expire-seconds")
    age = expire_seconds if expire_seconds is not None else (expire_days or 0) * 86400
    rule = state.connect().bucket(bucket).add_lifecycle_rule(age, prefix)
    emit(as_json, _lifecycle_json(rule), lambda: f"Added lifecycle rule {rule.rule_id}: {prefix or '*'} after {age} s")


@lifecycle_group.command("list")
@click.argument("bucket")
@json_option
@pass_state
def lifecycle_list(state: CliState, bucket: str, as_json: bool) -> None:
    """List BUCKET's lifecycle rules."""
    rules = state.connect().bucket(bucket).lifecycle_rules()

    def table() -> Table:
        t = Table("rule", "prefix", "max age (s)")
        for r in rules:
            t.add_row(r.rule_id, r.prefix or "*", str(r.max_age_seconds))
        return t

    emit(as_json, [_lifecycle_json(r) for r in rules], table)


@lifecycle_group.command("remove")
@click.argument("bucket")
@click.option("--id", "rule_id", required=True, help="The rule to remove.")
@json_option
@pass_state
def lifecycle_remove(state: CliState, bucket: str, rule_id: str, as_json: bool) -> None:
    """Remove a lifecycle rule of BUCKET."""
    state.connect().bucket(bucket).remove_lifecycle_rule(rule_id)
    emit(as_json, {"removed": rule_id}, lambda: f"Removed lifecycle rule {rule_id}")


# -- objects ------------------------------------------------------------------------------------
def _split(path: str) -> tuple[str, str]:
    bucket, slash, key = path.partition("/")
    if not slash or not key:
        raise CliError(f"{path!r}: name an object as BUCKET/KEY")
    return bucket, key


def _transfer_progress(total: int | None, quiet: bool) -> Progress:
    err = console(stderr=True)
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(bar_width=36),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=quiet or not err.is_terminal or (total is not None and total < PROGRESS_BYTES),
    )


def _reading(source: IO[bytes], progress: Progress, task: Any) -> Iterator[bytes]:
    while chunk := source.read(CHUNK):
        progress.advance(task, len(chunk))
        yield chunk


@object_group.command("put")
@click.argument("path", metavar="BUCKET/KEY")
@click.option("--file", "file", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="Read this file.")
@click.option("--pipe", is_flag=True, help="Read standard input.")
@click.option("--content-type", help="The object's content type.")
@click.option("--metadata", "metadata", multiple=True, metavar="NAME=VALUE", help="Custom metadata (repeatable).")
@json_option
@pass_state
def object_put(
    state: CliState,
    path: str,
    file: Path | None,
    pipe: bool,
    content_type: str | None,
    metadata: tuple[str, ...],
    as_json: bool,
) -> None:
    """Store an object from --file or --pipe (standard input)."""
    if (file is None) == (not pipe):
        raise CliError("give --file PATH or --pipe")
    custom: dict[str, str] = {}
    for item in metadata:
        name, eq, value = item.partition("=")
        if not eq:
            raise CliError(f"--metadata {item!r}: give NAME=VALUE")
        custom[name] = value
    bucket, key = _split(path)
    b = state.connect().bucket(bucket)
    total = file.stat().st_size if file is not None else None
    with _transfer_progress(total, as_json) as progress:
        task = progress.add_task(f"put {key}", total=total)
        if file is not None:
            with file.open("rb") as source:
                info = b.put(key, _reading(source, progress, task), content_type=content_type, metadata=custom)
        else:
            info = b.put(key, _reading(sys.stdin.buffer, progress, task), content_type=content_type, metadata=custom)
    emit(
        as_json, _object_json(info), lambda: f"Stored {bucket}/{key} ({info.size:,} bytes, sha256 {info.sha256[:16]}…)"
    )


@object_group.command("get")
@click.argument("path", metavar="BUCKET/KEY")
@click.option("--file", "file", type=click.Path(dir_okay=False, path_type=Path), help="Write here (else stdout).")
@pass_state
def object_get(state: CliState, path: str, file: Path | None) -> None:
    """Read an object into --file, or to standard output."""
    bucket, key = _split(path)
    body = state.connect().bucket(bucket).get(key)
    out = file.open("wb") if file is not None else sys.stdout.buffer
    try:
        with _transfer_progress(body.info.size, file is None) as progress:
            task = progress.add_task(f"get {key}", total=body.info.size)
            for chunk in body:
                out.write(chunk)
                progress.advance(task, len(chunk))
    finally:
        if file is not None:
            out.close()
        else:
            out.flush()


@object_group.command("delete")
@click.argument("path", metavar="BUCKET/KEY")
@json_option
@pass_state
def object_delete(state: CliState, path: str, as_json: bool) -> None:
    """Delete an object (nothing if it does not exist)."""
    bucket, key = _split(path)
    existed = state.connect().bucket(bucket).delete(key)
    emit(
        as_json,
        {"deleted": key, "existed": bool(existed)},
        lambda: f"Deleted {bucket}/{key}" if existed else f"{bucket}/{key} did not exist",
    )


@object_group.command("list")
@click.argument("bucket")
@click.option("--prefix", default="", help="Only keys with this prefix.")
@json_option
@pass_state
def object_list(state: CliState, bucket: str, prefix: str, as_json: bool) -> None:
    """List BUCKET's objects (in key order)."""
    objects = list(state.connect().bucket(bucket).list(prefix=prefix))

    def table() -> Table:
        t = Table("key", "size", "content type", "uploaded")
        for o in objects:
            t.add_row(o.key, f"{o.size:,}", o.content_type, o.uploaded.strftime("%Y-%m-%d %H:%M:%S"))
        return t

    emit(as_json, [_object_json(o) for o in objects], table)
