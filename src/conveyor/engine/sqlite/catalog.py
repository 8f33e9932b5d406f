"""The embedded catalog: queues, consumers and the shard map, in ``catalog.db``."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from conveyor.engine.base import prefix_range
from conveyor.engine.catalog_rows import (
    consumer_from_row,
    consumer_parameters,
    consumer_settings_parameters,
    queue_parameters,
)
from conveyor.engine.sqlfile import load_queries, load_script
from conveyor.engine.sqlite.snapshot import CatalogSnapshot, QueueEntry
from conveyor.engine.sqlite.storage import open_database, translate_error
from conveyor.errors import ConsumerExists, ConsumerNotFound, QueueExists, QueueNotFound
from conveyor.ids import new_id
from conveyor.model import ConsumerInfo, ConsumerSettings, ConsumerType, QueueInfo, QueueSettings

SCHEMA = load_script("conveyor.engine.sqlite", "catalog.sql")
VERSION = 2
# From version v to v + 1: 1 -> 2 moves plain queue names into account `local`.
UPGRADES = {1: load_script("conveyor.engine.sqlite", "catalog_v1_to_v2.sql")}
Q = load_queries("conveyor.engine.sqlite", "catalog_queries.sql")
T = TypeVar("T")


class Catalog:
    """Transactional metadata; every method is one short transaction."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn = open_database(path, SCHEMA, version=VERSION, upgrades=UPGRADES)
        self._lock = threading.Lock()
        self._seen_version = -1

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _tx(self, fn: Callable[[sqlite3.Connection], T], *, write: bool = True) -> T:
        with self._lock:
            conn = self._conn
            try:
                if write:
                    conn.execute("BEGIN IMMEDIATE")
                try:
                    result = fn(conn)
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                if conn.in_transaction:
                    conn.execute("COMMIT")
                return result
            except sqlite3.IntegrityError:
                raise
            except sqlite3.Error as exc:
                raise translate_error(exc, str(self.path)) from None

    def changed(self) -> bool:
        """Whether another connection changed the catalog since the last call."""
        version = self._tx(lambda c: c.execute(Q["data_version"]).fetchone()[0], write=False)
        changed = version != self._seen_version
        self._seen_version = version
        return bool(changed)

    # -- queues -------------------------------------------------------------------------------
    def _queue(self, conn: sqlite3.Connection, query: str, key: str) -> QueueInfo:
        """The queue by ``queue_by_id`` or ``queue_by_name``."""
        row = conn.execute(Q[query], {"key": key}).fetchone()
        if row is None:
            raise QueueNotFound(f"queue {key!r} does not exist")
        return _queue_info(row, conn.execute(Q["consumers_of"], {"queue": row[0]}).fetchall())

    def create_queue(
        self, name: str, settings: QueueSettings, shards: int, now_ms: int, queue_id: str | None = None
    ) -> QueueInfo:
        """Add the queue's rows. With ``queue_id``, its shard files were made beforehand (marked
        materialized in the same commit), so a queue is in the catalog only with its files."""

        def fn(conn: sqlite3.Connection) -> QueueInfo:
            if conn.execute(Q["name_taken"], {"name": name}).fetchone():
                raise QueueExists(f"a queue named {name!r} already exists")
            new_queue_id = queue_id or new_id()
            conn.execute(Q["insert_queue"], queue_parameters(new_queue_id, settings) | {"name": name})
            made = int(queue_id is not None)
            conn.executemany(
                Q["insert_shard"],
                [{"queue": new_queue_id, "number": n, "now": now_ms, "made": made} for n in range(shards)],
            )
            conn.execute(Q["bump_generation"])
            return self._queue(conn, "queue_by_id", new_queue_id)

        return self._tx(fn)

    def get_queue(self, name: str) -> QueueInfo:
        return self._tx(lambda c: self._queue(c, "queue_by_name", name), write=False)

    def get_queue_by_id(self, queue_id: str) -> QueueInfo:
        return self._tx(lambda c: self._queue(c, "queue_by_id", queue_id), write=False)

    def list_queues(self, prefix: str = "") -> list[QueueInfo]:
        """The queues whose names start with ``prefix``, by name: two statements in one read
        transaction (the rows, then their consumers), however many queues there are."""

        def fn(conn: sqlite3.Connection) -> list[QueueInfo]:
            conn.execute("BEGIN")  # a read transaction: the consumers are those of the rows read
            if prefix:
                low, high = prefix_range(prefix)
                span = {"low": low, "high": high}
                rows = conn.execute(Q["queues_listed_in_range"], span).fetchall()
                consumers = conn.execute(Q["consumers_listed_in_range"], span).fetchall()
            else:
                rows = conn.execute(Q["queues_listed"]).fetchall()
                consumers = conn.execute(Q["consumers_listed"]).fetchall()
            of: dict[str, list[tuple[Any, ...]]] = {}
            for consumer in consumers:
                of.setdefault(consumer[1], []).append(consumer)
            return [_queue_info(row, of.get(row[0], ())) for row in rows]

        return self._tx(fn, write=False)

    def queue_names(self, prefix: str = "") -> list[str]:
        """The names of the queues whose names start with ``prefix``, by name: one statement."""
        if prefix:
            low, high = prefix_range(prefix)
            rows = self._tx(
                lambda c: c.execute(Q["names_in_range"], {"low": low, "high": high}).fetchall(), write=False
            )
        else:
            rows = self._tx(lambda c: c.execute(Q["names"]).fetchall(), write=False)
        return [name for (name,) in rows]

    def queues_named(self, names: Sequence[str]) -> list[QueueInfo]:
        """The queues of ``names`` that exist, by name: two statements in one read transaction."""
        wanted = {"names": json.dumps(list(names))}

        def fn(conn: sqlite3.Connection) -> list[QueueInfo]:
            conn.execute("BEGIN")
            rows = conn.execute(Q["queues_named"], wanted).fetchall()
            of: dict[str, list[tuple[Any, ...]]] = {}
            for consumer in conn.execute(Q["consumers_named"], wanted):
                of.setdefault(consumer[1], []).append(consumer)
            return [_queue_info(row, of.get(row[0], ())) for row in rows]

        return self._tx(fn, write=False)

    def dead_letter_sources(self, queue_name: str) -> list[str]:
        """The names of the queues whose consumer dead-letters into ``queue_name``, by name."""
        rows = self._tx(lambda c: c.execute(Q["dead_letter_sources"], {"dlq": queue_name}).fetchall(), write=False)
        return [name for (name,) in rows]

    def update_queue(self, queue_id: str, settings: QueueSettings) -> QueueInfo:
        def fn(conn: sqlite3.Connection) -> QueueInfo:
            if not conn.execute(Q["update_queue"], queue_parameters(queue_id, settings)).rowcount:
                raise QueueNotFound(f"queue {queue_id!r} does not exist")
            conn.execute(Q["bump_generation"])
            return self._queue(conn, "queue_by_id", queue_id)

        return self._tx(fn)

    def delete_queue(self, queue_id: str) -> list[int]:
        """Delete the queue's rows; returns its shard numbers, whose files the caller removes."""

        def fn(conn: sqlite3.Connection) -> list[int]:
            shards = [n for (n, _) in conn.execute(Q["shards_of"], {"queue": queue_id})]
            if not conn.execute(Q["delete_queue"], {"queue": queue_id}).rowcount:
                raise QueueNotFound(f"queue {queue_id!r} does not exist")
            conn.execute(Q["bump_generation"])
            return shards

        return self._tx(fn)

    # -- shard map ----------------------------------------------------------------------------
    def shards(self, queue_id: str) -> list[tuple[int, str]]:
        """(shard number, state) of every shard of the queue."""
        return self._tx(lambda c: c.execute(Q["shards_of"], {"queue": queue_id}).fetchall(), write=False)

    def materialized(self, queue_id: str, shard_no: int) -> bool:
        """Whether the shard's file was made once (so a missing file was deleted)."""
        args = {"queue": queue_id, "number": shard_no}
        row = self._tx(lambda c: c.execute(Q["materialized"], args).fetchone(), write=False)
        return bool(row and row[0])

    def mark_materialized(self, queue_id: str, shard_no: int) -> None:
        self._tx(lambda c: c.execute(Q["mark_materialized"], {"queue": queue_id, "number": shard_no}))

    def add_shard(self, queue_id: str, now_ms: int) -> int:
        def fn(conn: sqlite3.Connection) -> int:
            (top,) = conn.execute(Q["top_shard"], {"queue": queue_id}).fetchone()
            if top is None:
                raise QueueNotFound(f"queue {queue_id!r} does not exist")
            conn.execute(Q["insert_shard"], {"queue": queue_id, "number": top + 1, "now": now_ms, "made": 0})
            conn.execute(Q["bump_generation"])
            return int(top) + 2

        return self._tx(fn)

    # -- snapshot -----------------------------------------------------------------------------
    def generation(self) -> int:
        """The catalog generation: how many changes to queues and shards were committed."""
        return int(self._tx(lambda c: c.execute(Q["generation"]).fetchone()[0], write=False))

    def snapshot(self) -> CatalogSnapshot:
        """Every queue's settings and shard map, and the generation they are at, read in one transaction."""

        def fn(conn: sqlite3.Connection) -> CatalogSnapshot:
            conn.execute("BEGIN")  # a read transaction: the queries below see one state of the file
            (generation,) = conn.execute(Q["generation"]).fetchone()
            shards: dict[str, list[tuple[int, str]]] = {}
            for queue_id, number, state in conn.execute(Q["all_shards"]):
                shards.setdefault(queue_id, []).append((number, state))
            queues = {
                queue_id: QueueEntry(
                    name, QueueSettings(delay, bool(paused), retention), tuple(shards.get(queue_id, ()))
                )
                for queue_id, name, delay, paused, retention in conn.execute(Q["all_queue_settings"])
            }
            return CatalogSnapshot(int(generation), queues)

        return self._tx(fn, write=False)

    def next_producer_slot(self) -> int:
        return int(self._tx(lambda c: c.execute(Q["next_producer_slot"]).fetchone()[0]))

    # -- consumers ----------------------------------------------------------------------------
    def add_consumer(
        self, queue_id: str, type: ConsumerType, script_name: str, settings: ConsumerSettings, dlq: str
    ) -> ConsumerInfo:
        def fn(conn: sqlite3.Connection) -> ConsumerInfo:
            queue = self._queue(conn, "queue_by_id", queue_id)
            if queue.consumers:
                raise ConsumerExists(
                    f"queue {queue.queue_name!r} already has a consumer ({queue.consumers[0].type}); "
                    "a queue has one consumer at a time"
                )
            args = consumer_parameters(new_id(), queue_id, type, script_name, settings, dlq)
            conn.execute(Q["insert_consumer"], args)
            return self._consumer(conn, str(args["consumer"]))

        return self._tx(fn)

    def _consumer(self, conn: sqlite3.Connection, consumer_id: str) -> ConsumerInfo:
        row = conn.execute(Q["consumer"], {"consumer": consumer_id}).fetchone()
        if row is None:
            raise ConsumerNotFound(f"consumer {consumer_id!r} does not exist")
        return consumer_from_row(row)

    def update_consumer(self, consumer_id: str, settings: ConsumerSettings, dlq: str) -> ConsumerInfo:
        def fn(conn: sqlite3.Connection) -> ConsumerInfo:
            args = consumer_settings_parameters(consumer_id, settings, dlq)
            if not conn.execute(Q["update_consumer"], args).rowcount:
                raise ConsumerNotFound(f"consumer {consumer_id!r} does not exist")
            return self._consumer(conn, consumer_id)

        return self._tx(fn)

    def remove_consumer(self, consumer_id: str) -> None:
        def fn(conn: sqlite3.Connection) -> None:
            if not conn.execute(Q["delete_consumer"], {"consumer": consumer_id}).rowcount:
                raise ConsumerNotFound(f"consumer {consumer_id!r} does not exist")

        self._tx(fn)


def _queue_info(row: Sequence[Any], consumers: Sequence[tuple[Any, ...]]) -> QueueInfo:
    """A queue from its ``queue_by_id`` columns and its consumers' ``consumers_of`` rows."""
    return QueueInfo(
        queue_id=row[0],
        queue_name=row[1],
        created_on=row[2],
        modified_on=row[3],
        settings=QueueSettings(delivery_delay=row[4], delivery_paused=bool(row[5]), message_retention_period=row[6]),
        consumers=tuple(consumer_from_row(c) for c in consumers),
        shards=row[7],
    )
