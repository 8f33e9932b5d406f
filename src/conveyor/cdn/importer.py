"""``conveyor cdn import DIR``: an existing catalog (``ajax/libs/{name}/{version}/...``, cdnjs's
tree) copied byte for byte into the primary and mirror buckets and KV, one queue message per package.

Nothing of a file is regenerated: each file is published as it is in the tree, its SHA-512 and (for
``.js``/``.css``) its SRI computed from those bytes. cdnjs's tree holds no compressed copies, so the
``.br`` (quality 11) and ``.gz`` (level 9) are made here, as the compressor makes them; a tree that
already has a file where a compressed copy would go (``a.js`` and ``a.js.gz``) is refused for that
version. ``ajax/libs/{name}/package.json``, if there, gives the package record its description,
keywords, filename, homepage, license, author and repository.

The command sends one message per package to the queue ``cdn-import`` (at-least-once delivery, so
no package silently falls out) and counts them on a counter; each consumer run publishes a package's
versions with the publishing steps (each idempotent: a version already in the version list is left
as it is) and counts down once, after success or after its last attempt. Any worker that runs
:func:`add_import_consumer` takes part; ``import`` runs one in its own process until the count is 0.

>>> import_tree(cv, "/srv/cdnjs")                     # {"packages": 3, "imported": [...], "failed": {}}
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

import conveyor
from conveyor.cdn.config import NAME
from conveyor.cdn.errors import InvalidImportTree
from conveyor.cdn.metadata import Catalog, metadata_namespace, object_names
from conveyor.cdn.pipeline import SRI_EXTENSIONS, account_of
from conveyor.cdn.publish import Publisher, published_key
from conveyor.cdn.store import CdnStore
from conveyor.cdn.tarball import sri
from conveyor.extras import require_extra

log = logging.getLogger("conveyor.cdn")
IMPORT_QUEUE = "cdn-import"
MAX_ATTEMPTS = 4  # the first delivery and three retries
RECORD_FIELDS = ("description", "keywords", "filename", "homepage", "license", "author", "repository")


def libs_root(directory: str | Path) -> Path:
    """``DIR/ajax/libs`` when there is one, else ``DIR`` itself (the ``libs`` directory)."""
    root = Path(directory)
    nested = root / "ajax" / "libs"
    found = nested if nested.is_dir() else root
    if not found.is_dir():
        raise InvalidImportTree(f"{directory}: is not a directory")
    return found


def package_names(root: Path) -> list[str]:
    names = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    for name in names:
        if not NAME.match(name):
            raise InvalidImportTree(f"{root / name}: {name!r} is not a package name ([a-zA-Z0-9._-]+)")
    if not names:
        raise InvalidImportTree(f"{root}: has no package directory (ajax/libs/{{name}}/{{version}}/...)")
    return names


def _files(version_dir: Path) -> dict[str, Path]:
    """The version's regular files by path relative to it (symbolic links are not followed)."""
    found: dict[str, Path] = {}
    for path in sorted(version_dir.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        found[path.relative_to(version_dir).as_posix()] = path
    return found


def _package_config(root: Path, name: str) -> dict[str, Any]:
    config: dict[str, Any] = {"name": name, "description": "", "keywords": []}
    meta = root / name / "package.json"
    if meta.is_file():
        try:
            document = orjson.loads(meta.read_bytes())
        except orjson.JSONDecodeError as exc:
            raise InvalidImportTree(f"{meta}: is not JSON: {exc}") from None
        if isinstance(document, dict):
            config.update({k: document[k] for k in RECORD_FIELDS if k in document})
            if isinstance(config.get("author"), dict):
                config["author"] = str(config["author"].get("name", ""))
    return config


class Importer:
    def __init__(self, cv: conveyor.Conveyor, store: CdnStore) -> None:
        self.cv = cv
        self.publisher = Publisher(cv, store, store.settings(account_of(cv)))

    def import_package(self, root: Path, name: str) -> list[str]:
        """Publish every version of ``root/name`` not yet in the version list; the versions published."""
        require_extra("conveyor cdn import", "cdn", ("brotli",))
        import brotli

        catalog_versions = set(self.publisher_versions(name))
        imported = []
        versions = sorted(p.name for p in (root / name).iterdir() if p.is_dir() and not p.name.startswith("."))
        for version in versions:
            if version in catalog_versions:
                continue
            files = _files(root / name / version)
            if not files:
                continue
            for path in files:
                for obj in object_names(path)[1:]:
                    if obj in files:
                        raise InvalidImportTree(
                            f"{root / name / version / obj}: is a file where {path}'s compressed copy goes"
                        )
            records, hashes = [], {}
            targets = self.publisher.targets()
            for path, source in files.items():
                data = source.read_bytes()
                copies = [data]
                if len(object_names(path)) > 1:
                    copies += [brotli.compress(data, quality=11), gzip.compress(data, compresslevel=9, mtime=0)]
                for obj, body in zip(object_names(path), copies, strict=True):
                    for bucket in targets:
                        self.publisher.put_once(bucket, published_key(name, version, obj), body)
                    hashes[obj] = [len(body), hashlib.sha512(body).hexdigest()]
                records.append({"dest": path, "sri": sri(data) if path.endswith(SRI_EXTENSIONS) else None})
            self.publisher.write_metadata(name, version, hashes, records)
            self.publisher.make_visible(name, version, record=False)
            imported.append(version)
        self.publisher.write_package(name, _package_config(root, name))
        return imported

    def publisher_versions(self, name: str) -> list[str]:
        return Catalog(self.publisher.kv).versions(name)


def add_import_consumer(app: conveyor.App) -> None:
    """Register the consumer of ``cdn-import`` on ``app`` (the queue is made if missing)."""
    cv = app.conveyor
    try:
        cv.queue(IMPORT_QUEUE)
    except conveyor.QueueNotFound:
        cv.create_queue(IMPORT_QUEUE)
    store = CdnStore.open(cv.deployment)
    importer = Importer(cv, store)

    @app.consumer(IMPORT_QUEUE, max_batch_size=1, max_retries=MAX_ATTEMPTS - 1, retry_delay=1)
    def import_packages(batch: conveyor.MessageBatch) -> None:
        for message in batch.messages:
            body = message.body
            try:
                versions = importer.import_package(Path(body["root"]), body["name"])
                log.info("cdn import %s: %d version(s) published", body["name"], len(versions))
            except Exception as exc:
                if message.attempts < MAX_ATTEMPTS:
                    raise
                log.error("cdn import %s: failed after %d attempts: %s", body["name"], message.attempts, exc)
            cv.counter(body["counter"]).add(-1, key=body["name"])


def import_tree(cv: conveyor.Conveyor, directory: str | Path, *, timeout: float = 3600.0) -> dict[str, Any]:
    """Send one message per package of ``directory``'s tree and run the import consumer here until
    every package is done: ``{"packages": n, "imported": [names], "failed": [names]}`` (a failed
    package's reason is logged). ``TimeoutError`` past ``timeout`` seconds (the messages stay)."""
    root = libs_root(directory)
    names = package_names(root)
    CdnStore.open(cv.deployment).close()
    counter = cv.counter(f"cdn-import:{uuid.uuid4().hex}")
    counter.add(len(names), key="fan-out")
    app = conveyor.App(cv, grace_period=5)
    add_import_consumer(app)
    queue = cv.queue(IMPORT_QUEUE)
    messages = [{"body": {"root": str(root.resolve()), "name": n, "counter": counter.name}} for n in names]
    for start in range(0, len(messages), 100):
        queue.send_batch(messages[start : start + 100])
    app.start()
    try:
        deadline = time.monotonic() + timeout
        while counter.value() > 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the import of {len(names)} packages has not ended after {timeout:.0f} s")
            time.sleep(0.1)
    finally:
        app.stop()
        counter.delete()
    catalog = Catalog(metadata_namespace(cv))
    found = {record["name"] for record in catalog.packages(names)}
    return {
        "packages": len(names),
        "imported": [n for n in names if n in found],
        "failed": [n for n in names if n not in found],
    }
