"""The PostgreSQL catalog: queues, consumers and the shard map, each change one short transaction.

A queue's storage shards are partitions of ``messages``: creating a queue (or adding a shard)
creates the partition and its striped counter rows in the same transaction as the catalog rows, and
deleting a queue drops its partitions — no row-by-row delete, no dead rows left behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from conveyor.engine.base import prefix_range
from conveyor.engine.catalog_rows import (
    consumer_from_row,
    consumer_parameters,
    consumer_settings_parameters,
    queue_parameters,
)
from conveyor.engine.postgres.database import ReadPool
from conveyor.engine.sqlfile import load_queries
from conveyor.errors import ConsumerExists, ConsumerNotFound, QueueExists, QueueNotFound
from conveyor.ids import new_id
from conveyor.model import ConsumerInfo, ConsumerSettings, ConsumerType, QueueInfo, QueueSettings

Q = load_queries("conveyor.engine.postgres", "queries.sql")
Connection = psycopg.Connection[tuple[Any, ...]]

# Counter rows per shard: each engine writes one, so up to this many writers never share a row lock.
STAT_SLOTS = 16


def partition_name(shard_key: int) -> sql.Identifier:
    return sql.Identifier(f"messages_{shard_key}")


def _queue(conn: Connection, query: str, key: str) -> QueueInfo:
    rows = conn.execute(Q[query], {"key": key}).fetchall()
    if not rows:
        raise QueueNotFound(f"queue {key!r} does not exist")
    return _queue_info(rows)


def _queue_info(rows: Sequence[tuple[Any, ...]]) -> QueueInfo:
    """A queue from its rows of ``queue_by_id`` (one a consumer, or one with NULLs for none)."""
    row = rows[0]
    consumers = [r[8:] for r in rows if r[8] is not None]
    return QueueInfo(
        queue_id=row[0],
        queue_name=row[1],
        created_on=row[2],
        modified_on=row[3],
        settings=QueueSettings(delivery_delay=row[4], delivery_paused=row[5], message_retention_period=row[6]),
        consumers=tuple(consumer_from_row(c) for c in consumers),
        shards=row[7],
    )


def _add_shard(conn: Connection, queue_id: str, now_ms: int) -> int:
    key, number = conn.execute(Q["insert_shard"], {"queue": queue_id, "now": now_ms}).fetchone()  # type: ignore[misc]
    conn.execute(sql.SQL(Q["create_partition"]).format(partition=partition_name(key), key=sql.Literal(key)))
    conn.execute(Q["insert_shard_stats"], {"shard": key, "slots": STAT_SLOTS})
    return int(number)


class Catalog:
    """Queues, consumers and shards; every method is one transaction."""

    def __init__(self, pool: ReadPool) -> None:
        self._pool = pool

    # -- queues -------------------------------------------------------------------------------
    def create_queue(self, name: str, settings: QueueSettings, shards: int, now_ms: int) -> QueueInfo:
        def fn(conn: Connection) -> QueueInfo:
            created = conn.execute(Q["insert_queue"], queue_parameters(new_id(), settings) | {"name": name}).fetchone()
            if created is None:
                raise QueueExists(f"a queue named {name!r} already exists")
            for _ in range(shards):
                _add_shard(conn, created[0], now_ms)
            return _queue(conn, "queue_by_id", created[0])

        return self._pool.transaction(fn, "create queue")

    def get_queue(self, name: str) -> QueueInfo:
        return self._pool.run(lambda c: _queue(c, "queue_by_name", name), "read queue")

    def get_queue_by_id(self, queue_id: str) -> QueueInfo:
        return self._pool.run(lambda c: _queue(c, "queue_by_id", queue_id), "read queue")

    def queue_settings(self, queue_id: str) -> QueueSettings:
        row = self._pool.run(lambda c: c.execute(Q["queue_settings"], {"queue": queue_id}).fetchone(), "read queue")
        if row is None:
            raise QueueNotFound(f"queue {queue_id!r} does not exist")
        return QueueSettings(delivery_delay=row[0], delivery_paused=row[1], message_retention_period=row[2])

    def list_queues(self, prefix: str = "") -> list[QueueInfo]:
        """The queues whose names start with ``prefix``, by name: one statement (each queue with
        its consumer), however many queues there are."""

        def fn(conn: Connection) -> list[QueueInfo]:
            if prefix:
                low, high = prefix_range(prefix)
                rows = conn.execute(Q["queues_listed_in_range"], {"low": low, "high": high}).fetchall()
            else:
                rows = conn.execute(Q["queues_listed"]).fetchall()
            grouped: dict[str, list[tuple[Any, ...]]] = {}
            for row in rows:  # in name order; a queue's rows are adjacent (one a consumer)
                grouped.setdefault(row[0], []).append(row)
            return [_queue_info(queue_rows) for queue_rows in grouped.values()]

        return self._pool.run(fn, "list queues")

    def queue_names(self, prefix: str = "") -> list[str]:
        """The names of the queues whose names start with ``prefix``, by name: one statement."""

        def fn(conn: Connection) -> list[str]:
            if prefix:
                low, high = prefix_range(prefix)
                return [str(n) for (n,) in conn.execute(Q["names_in_range"], {"low": low, "high": high})]
            return [str(n) for (n,) in conn.execute(Q["names"])]

        return self._pool.run(fn, "list queue names")

    def queues_named(self, names: Sequence[str]) -> list[QueueInfo]:
        """The queues of ``names`` that exist, by name: one statement."""

        def fn(conn: Connection) -> list[QueueInfo]:
            grouped: dict[str, list[tuple[Any, ...]]] = {}
            for row in conn.execute(Q["queues_named"], {"names": list(names)}):
                grouped.setdefault(row[0], []).append(row)
            return [_queue_info(queue_rows) for queue_rows in grouped.values()]

        return self._pool.run(fn, "read queues")

    def dead_letter_sources(self, queue_name: str) -> list[str]:
        """The names of the queues whose consumer dead-letters into ``queue_name``, by name."""
        rows = self._pool.run(
            lambda c: c.execute(Q["dead_letter_sources"], {"dlq": queue_name}).fetchall(), "read dead letter sources"
        )
        return [str(name) for (name,) in rows]

    def update_queue(self, queue_id: str, settings: QueueSettings) -> QueueInfo:
        def fn(conn: Connection) -> QueueInfo:
            if not conn.execute(Q["update_queue"], queue_parameters(queue_id, settings)).rowcount:
                raise QueueNotFound(f"queue {queue_id!r} does not exist")
            return _queue(conn, "queue_by_id", queue_id)

        return self._pool.transaction(fn, "update queue")

    def delete_queue(self, queue_id: str) -> None:
        def fn(conn: Connection) -> None:
            keys = [k for (k,) in conn.execute(Q["shard_keys"], {"queue": queue_id}).fetchall()]
            if conn.execute(Q["delete_queue"], {"queue": queue_id}).fetchone() is None:
                raise QueueNotFound(f"queue {queue_id!r} does not exist")
            for key in keys:
                conn.execute(sql.SQL(Q["drop_partition"]).format(partition=partition_name(key)))

        self._pool.transaction(fn, "delete queue")

    # -- shard map ----------------------------------------------------------------------------
    def shards(self, queue_id: str) -> list[tuple[int, int, str]]:
        """(shard key, shard number, state) of every shard of the queue, by number."""
        rows = self._pool.run(lambda c: c.execute(Q["shards_of"], {"queue": queue_id}).fetchall(), "read shards")
        return [(int(k), int(n), str(s)) for k, n, s in rows]

    def add_shard(self, queue_id: str, now_ms: int) -> int:
        def fn(conn: Connection) -> int:
            if conn.execute(Q["queue_by_id"], {"key": queue_id}).fetchone() is None:
                raise QueueNotFound(f"queue {queue_id!r} does not exist")
            return _add_shard(conn, queue_id, now_ms) + 1

        return self._pool.transaction(fn, "add shard")

    def next_producer_slot(self) -> int:
        return int(self._pool.run(lambda c: c.execute(Q["producer_slot"]).fetchone()[0], "producer slot"))  # type: ignore[index]

    # -- consumers ----------------------------------------------------------------------------
    def add_consumer(
        self, queue_id: str, type: ConsumerType, script_name: str, settings: ConsumerSettings, dlq: str
    ) -> ConsumerInfo:
        def fn(conn: Connection) -> ConsumerInfo:
            queue = _queue(conn, "queue_by_id", queue_id)
            args = consumer_parameters(new_id(), queue_id, type, script_name, settings, dlq)
            if queue.consumers or conn.execute(Q["insert_consumer"], args).fetchone() is None:
                existing = queue.consumers[0].type if queue.consumers else "another"
                raise ConsumerExists(
                    f"queue {queue.queue_name!r} already has a consumer ({existing}); "
                    "a queue has one consumer at a time"
                )
            return self._consumer(conn, str(args["consumer"]))

        return self._pool.transaction(fn, "add consumer")

    @staticmethod
    def _consumer(conn: Connection, consumer_id: str) -> ConsumerInfo:
        row = conn.execute(Q["consumer"], {"consumer": consumer_id}).fetchone()
        if row is None:
            raise ConsumerNotFound(f"consumer {consumer_id!r} does not exist")
        return consumer_from_row(row)

    def update_consumer(self, consumer_id: str, settings: ConsumerSettings, dlq: str) -> ConsumerInfo:
        def fn(conn: Connection) -> ConsumerInfo:
            args = consumer_settings_parameters(consumer_id, settings, dlq)
            if not conn.execute(Q["update_consumer"], args).rowcount:
                raise ConsumerNotFound(f"consumer {consumer_id!r} does not exist")
            return self._consumer(conn, consumer_id)

        return self._pool.transaction(fn, "update consumer")

    def remove_consumer(self, consumer_id: str) -> None:
        def fn(conn: Connection) -> None:
            if not conn.execute(Q["delete_consumer"], {"consumer": consumer_id}).rowcount:
                raise ConsumerNotFound(f"consumer {consumer_id!r} does not exist")

        self._pool.transaction(fn, "remove consumer")
