"""``conveyor kv ...``: KV namespaces and keys, shaped like wrangler's ``kv namespace`` and ``kv key``.

A namespace is named by ``--namespace TITLE`` or ``--namespace-id ID`` (wrangler's ``--binding``
and ``--namespace-id``). A value given on the command line is stored as text; ``--path FILE``
stores the file's bytes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from conveyor.cli.context import CliError, CliState, ConveyorGroup, emit, json_option, pass_state
from conveyor.codec import decode_json
from conveyor.storage.kv_handle import KVNamespace


@click.group("kv", cls=ConveyorGroup, short_help="Manage KV namespaces and keys.")
def kv_group() -> None:
    """KV namespaces (``kv namespace create|list|delete``) and their keys (``kv key put|get|list|delete``)."""


@kv_group.group("namespace", cls=ConveyorGroup, short_help="Create, list and delete KV namespaces.")
def namespace_group() -> None:
    """Create, list and delete KV namespaces."""


@kv_group.group("key", cls=ConveyorGroup, short_help="Put, get, list and delete keys.")
def key_group() -> None:
    """Put, get, list and delete the keys of a KV namespace."""


def _namespace_json(ns: Any) -> dict[str, Any]:
    return {"id": ns.id, "title": ns.title, "supports_url_encoding": True}


def namespace_options(fn: Any) -> Any:
    fn = click.option("--namespace-id", "namespace_id", help="The namespace's id (32 hex characters).")(fn)
    return click.option("--namespace", "title", help="The namespace's title.")(fn)


def _open(state: CliState, title: str | None, namespace_id: str | None) -> KVNamespace:
    if (title is None) == (namespace_id is None):
        raise CliError("name the namespace with exactly one of --namespace TITLE and --namespace-id ID")
    cv = state.connect()
    return cv.kv(title) if title is not None else cv.kv_by_id(namespace_id or "")


@namespace_group.command("create")
@click.argument("title")
@json_option
@pass_state
def create(state: CliState, title: str, as_json: bool) -> None:
    """Create the namespace TITLE."""
    ns = state.connect().create_kv_namespace(title)
    emit(
        as_json,
        _namespace_json(ns),
        lambda: Text.assemble("Created KV namespace ", (title, "bold cyan"), f" ({ns.id})"),
    )


@namespace_group.command("list")
@json_option
@pass_state
def list_namespaces(state: CliState, as_json: bool) -> None:
    """List the account's namespaces."""
    found = state.connect().list_kv_namespaces()

    def table() -> Table:
        out = Table("title", "id")
        for ns in found:
            out.add_row(ns.title, ns.id)
        return out

    emit(as_json, [_namespace_json(ns) for ns in found], table)


@namespace_group.command("delete")
@namespace_options
@json_option
@pass_state
def delete_namespace(state: CliState, title: str | None, namespace_id: str | None, as_json: bool) -> None:
    """Delete a namespace and every key in it."""
    ns = _open(state, title, namespace_id)
    state.connect().delete_kv_namespace(ns.title)
    emit(as_json, _namespace_json(ns), lambda: Text.assemble("Deleted KV namespace ", (ns.title, "bold cyan")))


@key_group.command("put")
@click.argument("key")
@click.argument("value", required=False)
@namespace_options
@click.option("--path", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="Store this file's bytes.")
@click.option("--metadata", help="Metadata as JSON (at most 1024 bytes).")
@click.option("--ttl", type=int, help="Seconds until the key expires (at least 60).")
@click.option("--expiration", type=int, help="When the key expires, in seconds since the epoch.")
@json_option
@pass_state
def put(
    state: CliState,
    key: str,
    value: str | None,
    title: str | None,
    namespace_id: str | None,
    path: Path | None,
    metadata: str | None,
    ttl: int | None,
    expiration: int | None,
    as_json: bool,
) -> None:
    """Store VALUE (text) or the bytes of --path under KEY."""
    if (value is None) == (path is None):
        raise CliError("give exactly one of VALUE and --path FILE")
    meta = None
    if metadata is not None:
        try:
            meta = decode_json(metadata.encode())
        except ValueError as exc:
            raise CliError(f"--metadata is not valid JSON: {exc}") from None
    data: str | bytes = value if value is not None else (path or Path()).read_bytes()
    ns = _open(state, title, namespace_id)
    ns.put(key, data, metadata=meta, expiration=expiration, expiration_ttl=ttl)
    emit(
        as_json, {"key": key, "namespace_id": ns.id}, lambda: Text.assemble("Wrote ", (key, "bold"), f" to {ns.title}")
    )


@key_group.command("get")
@click.argument("key")
@namespace_options
@click.option("--metadata", "with_metadata", is_flag=True, help="Print the key's metadata (JSON) instead.")
@pass_state
def get(state: CliState, key: str, title: str | None, namespace_id: str | None, with_metadata: bool) -> None:
    """Print KEY's value (its bytes, as stored) or, with --metadata, its metadata."""
    found = _open(state, title, namespace_id).get_value(key)
    if found is None:
        raise CliError(f"key {key!r} not found")
    if with_metadata:
        click.echo(json.dumps(found.metadata, ensure_ascii=False))
        return
    sys.stdout.buffer.write(found.data)
    sys.stdout.buffer.flush()


@key_group.command("list")
@namespace_options
@click.option("--prefix", default="", help="Only keys that start with this.")
@json_option
@pass_state
def list_keys(state: CliState, title: str | None, namespace_id: str | None, prefix: str, as_json: bool) -> None:
    """List the namespace's keys in byte order, with their expiration and metadata."""
    keys = list(_open(state, title, namespace_id).list(prefix=prefix))
    rows = [
        {
            "name": k.name,
            **({"expiration": k.expiration} if k.expiration is not None else {}),
            **({"metadata": k.metadata} if k.metadata is not None else {}),
        }
        for k in keys
    ]

    def table() -> Table:
        out = Table("name", "expiration", "metadata")
        for k in keys:
            out.add_row(
                k.name, "" if k.expiration is None else str(k.expiration), "" if k.metadata is None else str(k.metadata)
            )
        return out

    emit(as_json, rows, table)


@key_group.command("delete")
@click.argument("key")
@namespace_options
@json_option
@pass_state
def delete(state: CliState, key: str, title: str | None, namespace_id: str | None, as_json: bool) -> None:
    """Delete KEY (a missing key is no error)."""
    ns = _open(state, title, namespace_id)
    ns.delete(key)
    emit(
        as_json,
        {"key": key, "namespace_id": ns.id},
        lambda: Text.assemble("Deleted ", (key, "bold"), f" from {ns.title}"),
    )
