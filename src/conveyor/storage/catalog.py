"""The storage catalog's state transitions, written once over :class:`Database`: buckets, object
rows, rules, and the outbox rows written in the same transaction as the object row they report."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from conveyor.engine.base import Clock
from conveyor.storage.database import Database, Row, Transaction
from conveyor.storage.errors import (
    BucketExists,
    BucketNotEmpty,
    BucketNotFound,
    InvalidObjectKey,
    ObjectExists,
    RuleNotFound,
)
from conveyor.storage.model import BucketInfo, LifecycleRule, NotificationRule, ObjectInfo, from_ms
from conveyor.storage.names import shown
from conveyor.storage.notifications import Event, matches, message
from conveyor.storage.stores import BucketConfig

PAGE = 1000


def prefix_range(prefix: str) -> dict[str, object]:
    """The query parameters of the keys starting with ``prefix``: ``upper`` is the first string after
    all of them in code point order (bytewise UTF-8, as SQLite's BINARY and PostgreSQL's "C" collation
    compare), ``""`` when there is none."""
    upper = ""
    for i in range(len(prefix) - 1, -1, -1):
        if ord(prefix[i]) < 0x10FFFF:
            following = ord(prefix[i]) + 1
            if 0xD800 <= following <= 0xDFFF:  # surrogates are not characters: skip past them
                following = 0xE000
            upper = prefix[:i] + chr(following)
            break
    return {"prefix": prefix, "prefix_length": len(prefix), "upper": upper}


def object_info(row: Row) -> ObjectInfo:
    key, size, etag, sha256, content_type, metadata, uploaded_ms = row
    return ObjectInfo(key, int(size), etag, from_ms(int(uploaded_ms)), sha256, content_type, json.loads(metadata))


def _refuse_clash(tx: Transaction, account: str, bucket: str, key: str) -> None:
    """A local bucket's objects are files of one directory tree, so "a" and "a/b" cannot both be
    objects there (whether their bytes are files or, for small ones, in their rows): one rule for
    every object, whatever its size."""
    parts = key.split("/")
    for depth in range(1, len(parts)):
        parent = "/".join(parts[:depth])
        if tx.one("get_object", {"account": account, "bucket": bucket, "key": parent}) is not None:
            raise InvalidObjectKey(
                f"object key {shown(key)}: {parent!r} is an object, so a local bucket cannot hold keys below it"
            )
    below = {"account": account, "bucket": bucket, "after": "", "limit": 1, **prefix_range(key + "/")}
    if tx.rows("list_objects", below):
        raise InvalidObjectKey(
            f"object key {shown(key)}: {shown(key)} holds other objects (keys below it) in this local bucket"
        )


def _rule(row: Row) -> NotificationRule:
    rule_id, queue_id, queue_name, actions, prefix, suffix, description, created_ms = row
    return NotificationRule(
        rule_id, queue_name, queue_id, tuple(json.loads(actions)), prefix, suffix, description, from_ms(int(created_ms))
    )


def _lifecycle(row: Row) -> LifecycleRule:
    rule_id, prefix, max_age_seconds, created_ms = row
    return LifecycleRule(rule_id, prefix, int(max_age_seconds), from_ms(int(created_ms)))


def _config(row: Row, directory: str) -> BucketConfig:
    _, location, url, endpoint, region, key_id, secret, _ = row
    return BucketConfig(location, url, endpoint, region, key_id, secret, directory)


def _info(row: Row) -> BucketInfo:
    name, location, url, endpoint, region, _, _, created_ms = row
    return BucketInfo(name, location, url, endpoint, region, from_ms(int(created_ms)))


class Catalog:
    """Rows of one deployment's buckets, for every account (each call names its account)."""

    def __init__(self, db: Database, clock: Clock) -> None:
        self.db = db
        self.clock = clock

    # -- buckets ------------------------------------------------------------------------------
    def create_bucket(self, account: str, name: str, config: BucketConfig) -> BucketInfo:
        params = {
            "account": account,
            "name": name,
            "location": config.location,
            "url": config.url,
            "endpoint": config.endpoint,
            "region": config.region,
            "access_key_id": config.access_key_id,
            "secret_access_key": config.secret_access_key,
            "created_ms": self.clock.now_ms(),
        }

        def create(tx: Transaction) -> Row:
            if not tx.run("insert_bucket", params):
                raise BucketExists(f"bucket {name!r} already exists")
            row = tx.one("get_bucket", {"account": account, "name": name})
            assert row is not None
            return row

        return _info(self.db.transaction(create, "create bucket"))

    def bucket(self, account: str, name: str) -> tuple[BucketInfo, Row]:
        row = self.db.read(lambda tx: tx.one("get_bucket", {"account": account, "name": name}), "get bucket")
        if row is None:
            raise BucketNotFound(f"bucket {name!r} does not exist")
        return _info(row), row

    def config(self, row: Row, directory: str) -> BucketConfig:
        return _config(row, directory)

    def list_buckets(self, account: str) -> list[BucketInfo]:
        rows = self.db.read(lambda tx: tx.rows("list_buckets", {"account": account}), "list buckets")
        return [_info(row) for row in rows]

    def delete_bucket(self, account: str, name: str) -> None:
        where = {"account": account, "name": name, "bucket": name}

        def delete(tx: Transaction) -> None:
            if tx.one("get_bucket", where) is None:
                raise BucketNotFound(f"bucket {name!r} does not exist")
            if tx.one("any_object", where) is not None:
                raise BucketNotEmpty(f"bucket {name!r} is not empty: delete its objects first")
            tx.run("delete_bucket_rules", where)
            tx.run("delete_bucket_lifecycle", where)
            tx.run("delete_bucket", where)

        self.db.transaction(delete, "delete bucket")

    # -- objects ------------------------------------------------------------------------------
    def get_object(self, account: str, bucket: str, key: str) -> ObjectInfo | None:
        where = {"account": account, "bucket": bucket, "key": key}
        row = self.db.read(lambda tx: tx.one("get_object", where), "get object")
        return None if row is None else object_info(row)

    def read_object(
        self, account: str, bucket: str, key: str, *, wait: bool = True
    ) -> tuple[ObjectInfo, bytes | None] | None:
        """An object and, if its row holds them (a small object of a local bucket), its bytes.
        ``wait=False``: :class:`~conveyor.engine.tables.WouldWait` rather than wait for the database."""
        where = {"account": account, "bucket": bucket, "key": key}
        read = self.db.read if wait else self.db.read_nowait
        row = read(lambda tx: tx.one("read_object", where), "get object")
        return None if row is None else (object_info(row[:7]), None if row[7] is None else bytes(row[7]))

    def in_file(self, account: str, bucket: str, key: str) -> bool:
        """Whether ``key`` is an object whose bytes are a file (or in S3), not in its row."""
        where = {"account": account, "bucket": bucket, "key": key}
        row = self.db.read(lambda tx: tx.one("object_in_file", where), "get object")
        return row is not None and bool(row[0])

    def clash(self, account: str, bucket: str, key: str) -> None:
        """Refuse a local bucket's ``key`` whose path another object's needs (read alone; a put checks
        again in its transaction)."""
        self.db.read(lambda tx: _refuse_clash(tx, account, bucket, key), "check key")

    def list_objects(self, account: str, bucket: str, prefix: str, after: str, limit: int = PAGE) -> list[ObjectInfo]:
        params = {"account": account, "bucket": bucket, "after": after, "limit": limit, **prefix_range(prefix)}
        return [object_info(r) for r in self.db.read(lambda tx: tx.rows("list_objects", params), "list objects")]

    def record_object(
        self,
        account: str,
        bucket: str,
        info: ObjectInfo,
        event: Event,
        *,
        only_if_absent: bool,
        local: bool = False,
        data: bytes | None = None,
    ) -> tuple[list[tuple[str, str, str]], bool]:
        """Write the object's row (holding ``data``, the bytes of a small object of a local bucket,
        or None when they are a file or in S3) and, in the same transaction, an outbox row per
        matching rule. ``local``: refuse a key whose path clashes with another object's. Returns the
        outbox rows (event id, queue id, body) to send now, and whether the row replaced one whose
        bytes were a file and ``data`` took their place (the caller then deletes the file)."""
        params = {
            "account": account,
            "bucket": bucket,
            "key": info.key,
            "size": info.size,
            "etag": info.etag,
            "sha256": info.sha256,
            "content_type": info.content_type,
            "metadata": json.dumps(dict(info.metadata), separators=(",", ":"), sort_keys=True),
            "uploaded_ms": int(info.uploaded.timestamp() * 1000),
            "data": data,
        }

        def record(tx: Transaction) -> tuple[list[tuple[str, str, str]], bool]:
            if local:
                _refuse_clash(tx, account, bucket, info.key)
            # Only bytes moving into the row leave a file behind to delete.
            before = tx.one("object_in_file", params) if data is not None else None
            if not tx.run("insert_object" if only_if_absent else "upsert_object", params):
                raise ObjectExists(f"object {info.key!r} already exists in bucket {bucket!r} (only_if_absent)")
            return self._queue_events(tx, account, bucket, [event]), before is not None and bool(before[0])

        return self.db.transaction(record, "record object")

    def remove_objects(
        self, account: str, bucket: str, keys: Sequence[str], action: str
    ) -> tuple[list[tuple[ObjectInfo, bool]], list[tuple[str, str, str]]]:
        """Delete the rows of ``keys`` and queue a ``action`` event for each that existed; returns
        each removed object with whether its bytes are a file (or in S3) to delete now."""

        def remove(tx: Transaction) -> tuple[list[tuple[ObjectInfo, bool]], list[tuple[str, str, str]]]:
            removed: list[tuple[ObjectInfo, bool]] = []
            for key in keys:
                where = {"account": account, "bucket": bucket, "key": key}
                row = tx.one("read_object", where)
                if row is not None:
                    tx.run("delete_object", where)
                    removed.append((object_info(row[:7]), row[7] is None))
            events = [Event(action, info.key) for info, _ in removed]  # type: ignore[arg-type]
            return removed, self._queue_events(tx, account, bucket, events)

        return self.db.transaction(remove, "delete objects")

    def expired_objects(self, account: str, bucket: str, prefix: str, cutoff_ms: int, limit: int) -> list[ObjectInfo]:
        params = {"account": account, "bucket": bucket, "cutoff_ms": cutoff_ms, "limit": limit, **prefix_range(prefix)}
        return [object_info(r) for r in self.db.read(lambda tx: tx.rows("expired_objects", params), "expired")]

    # -- notification rules and the outbox ----------------------------------------------------
    def _queue_events(
        self, tx: Transaction, account: str, bucket: str, events: Sequence[Event]
    ) -> list[tuple[str, str, str]]:
        if not events:
            return []
        rules = [_rule(r) for r in tx.rows("list_rules", {"account": account, "bucket": bucket})]
        now = self.clock.now_ms()
        queued: list[tuple[str, str, str]] = []
        for event in events:
            for rule in rules:
                if matches(rule, event):
                    row = (uuid.uuid4().hex, rule.queue_id, message(account, bucket, event, now))
                    tx.run(
                        "insert_event",
                        {"event_id": row[0], "account": account, "queue_id": row[1], "body": row[2], "created_ms": now},
                    )
                    queued.append(row)
        return queued

    def add_rule(self, account: str, bucket: str, rule: NotificationRule, check: Any) -> NotificationRule:
        """Insert ``rule`` after ``check(existing rules)`` passes, in one transaction."""
        params = {
            "rule_id": rule.rule_id,
            "account": account,
            "bucket": bucket,
            "queue_id": rule.queue_id,
            "queue_name": rule.queue,
            "actions": json.dumps(list(rule.actions)),
            "prefix": rule.prefix,
            "suffix": rule.suffix,
            "description": rule.description,
            "created_ms": int(rule.created.timestamp() * 1000),
        }

        def add(tx: Transaction) -> NotificationRule:
            check([_rule(r) for r in tx.rows("list_rules", {"account": account, "bucket": bucket})])
            tx.run("insert_rule", params)
            return rule

        return self.db.transaction(add, "add notification rule")

    def rules(self, account: str, bucket: str) -> list[NotificationRule]:
        rows = self.db.read(lambda tx: tx.rows("list_rules", {"account": account, "bucket": bucket}), "rules")
        return [_rule(r) for r in rows]

    def remove_rule(self, account: str, bucket: str, rule_id: str) -> None:
        where = {"account": account, "bucket": bucket, "rule_id": rule_id}
        if not self.db.transaction(lambda tx: tx.run("delete_rule", where), "remove notification rule"):
            raise RuleNotFound(f"bucket {bucket!r} has no notification rule {rule_id!r}")

    def pending_events(self, before_ms: int, limit: int) -> list[tuple[str, str, str, str]]:
        params = {"before_ms": before_ms, "limit": limit}
        rows = self.db.read(lambda tx: tx.rows("pending_events", params), "pending notifications")
        return [(str(a), str(b), str(c), str(d)) for a, b, c, d in rows]

    def event_sent(self, event_id: str) -> None:
        # Not flushed: a crash that loses this only sends the notification once more.
        self.db.transaction(
            lambda tx: tx.run("delete_event", {"event_id": event_id}), "notification sent", durable=False
        )

    # -- lifecycle rules ----------------------------------------------------------------------
    def add_lifecycle_rule(self, account: str, bucket: str, rule: LifecycleRule) -> LifecycleRule:
        params = {
            "rule_id": rule.rule_id,
            "account": account,
            "bucket": bucket,
            "prefix": rule.prefix,
            "max_age_seconds": rule.max_age_seconds,
            "created_ms": int(rule.created.timestamp() * 1000),
        }
        self.db.transaction(lambda tx: tx.run("insert_lifecycle_rule", params), "add lifecycle rule")
        return rule

    def lifecycle_rules(self, account: str, bucket: str) -> list[LifecycleRule]:
        where = {"account": account, "bucket": bucket}
        return [_lifecycle(r) for r in self.db.read(lambda tx: tx.rows("list_lifecycle_rules", where), "rules")]

    def all_lifecycle_rules(self) -> list[tuple[str, str, LifecycleRule]]:
        rows = self.db.read(lambda tx: tx.rows("all_lifecycle_rules", {}), "lifecycle rules")
        return [(str(r[0]), str(r[1]), _lifecycle(r[2:])) for r in rows]

    def remove_lifecycle_rule(self, account: str, bucket: str, rule_id: str) -> None:
        where = {"account": account, "bucket": bucket, "rule_id": rule_id}
        if not self.db.transaction(lambda tx: tx.run("delete_lifecycle_rule", where), "remove lifecycle rule"):
            raise RuleNotFound(f"bucket {bucket!r} has no lifecycle rule {rule_id!r}")
