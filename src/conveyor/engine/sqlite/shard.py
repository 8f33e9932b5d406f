"""One storage shard: a SQLite file holding some of one queue's messages, with its own write path.

Every write goes through the shard's :class:`GroupCommitter`; reads (metrics, peek, wake-up checks)
use a second connection so they never wait behind a group's fsync.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from conveyor.codec import ContentType
from conveyor.engine.lease_ids import MISSING, SUPERSEDED
from conveyor.engine.sharded import LeaseGroup, ShardSettlement
from conveyor.engine.sqlfile import load_queries, load_script
from conveyor.engine.sqlite.group_commit import DECLINED, GroupCommitter, checkpointed_log_size
from conveyor.engine.sqlite.storage import open_database, translate_error
from conveyor.errors import QueueNotFound

Q = load_queries("conveyor.engine.sqlite", "queries.sql")
SCHEMA = load_script("conveyor.engine.sqlite", "shard.sql")
# Scripts that bring an older shard file up to date, by the version they start from.
UPGRADES = {
    1: load_script("conveyor.engine.sqlite", "shard_v1_to_v2.sql"),
    2: load_script("conveyor.engine.sqlite", "shard_v2_to_v3.sql"),
    3: load_script("conveyor.engine.sqlite", "shard_v3_to_v4.sql"),
}
SCHEMA_VERSION = 4
LONE_SEND = Q["lone_send"]
# Lone sends left uncounted in the `stats` row before one of them folds them in (shard.sql): each
# read of the counts adds them up, which costs what they are (a range of state rows by seq), and a
# fold writes the row's page, which a lone send otherwise leaves out of its commit.
FOLD_EVERY = 32
# A new shard file's page size. 8 KiB pages halve the frames (two writes each) a commit appends to
# the write-ahead log for a batch of 1 KB bodies, against the 4 KiB default; 16 KiB pages did no
# better (benchmarks/README.md has the figures).
PAGE_SIZE = 8192
# Pages the write-ahead log grows to before a commit copies them into the file (SQLite's default
# is 1,000): each checkpoint costs two fsyncs, and pages written again meanwhile (leased, then
# deleted) are copied once. More pages store faster (benchmarks/README.md), but a busy shard keeps a
# log file of this size (16 MiB) while open.
WAL_AUTOCHECKPOINT = 2000

# A row as the queries return it: (seq, id, timestamp_ms, content_type, body[, attempts]).
Row = tuple[int, str, int, ContentType, bytes]
LeasedRow = tuple[int, str, int, ContentType, bytes, int]
# A message going in: (id, timestamp_ms, content_type, body).
InsertRow = tuple[str, int, str, bytes]
# One call's store: (rows, visible_at, bytes, sent).
_Store = tuple[Sequence[InsertRow], int | Sequence[int], int, bool]
# The shard's counts after a lone send, as of its commit: (the write connection's total changes and
# data_version then, backlog count, backlog bytes, oldest timestamp, sends not yet folded in).
_Counts = tuple[int, int, int, int, int, int]


def _seqs(seqs: Iterable[int]) -> str:
    return orjson.dumps(list(seqs)).decode()


def _count_out(
    c: sqlite3.Connection,
    n: int,
    nbytes: int,
    *,
    acked: int = 0,
    dead_lettered: int = 0,
    dropped: int = 0,
    expired: int = 0,
) -> None:
    """Take ``n`` messages of ``nbytes`` off the backlog, counting why they left."""
    args = {"n": n, "bytes": nbytes, "acked": acked, "dead_lettered": dead_lettered, "dropped": dropped}
    c.execute(Q["count_out"], args | {"expired": expired})


def _lease(c: sqlite3.Connection, now_ms: int, n: int, until_ms: int, token: int) -> list[LeasedRow]:
    """Lease up to ``n`` deliverable messages until ``until_ms`` under ``token`` (see ``lease`` in
    queries.sql), in the caller's transaction."""
    attempts = dict(c.execute(Q["lease"], {"now": now_ms, "n": n, "until": until_ms, "token": token}).fetchall())
    if not attempts:
        return []
    c.execute(Q["advance_fresh"])
    rows = c.execute(Q["payloads"], {"seqs": _seqs(sorted(attempts))}).fetchall()
    return [(seq, mid, ts, ctype, body, attempts[seq]) for seq, mid, ts, ctype, body in rows]


def _fold(c: sqlite3.Connection) -> None:
    """Count the lone sends not yet counted into the ``stats`` row: before anything deletes a
    message, so that each one deleted was counted (a batch's count folds them in itself)."""
    c.execute(Q["fold"])


class Shard:
    """The message table of one shard file; ``made`` says the file was made before (so one found
    empty or truncated lost its messages, and is refused instead of made anew)."""

    def __init__(self, path: Path, number: int, *, made: bool = False) -> None:
        self.path = path
        self.number = number
        conn = open_database(
            path, SCHEMA, create=not made, version=SCHEMA_VERSION, upgrades=UPGRADES, page_size=PAGE_SIZE
        )
        conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT}")
        # Some builds (Debian's) zero every freed page, which writes a page to the log for each one
        # freed: a purge of a large queue would need as much free disk as the queue takes. FAST
        # still zeroes deleted content inside the pages a change writes anyway.
        conn.execute("PRAGMA secure_delete = FAST")
        conn.execute(Q["lone_send_view"])
        conn.execute(Q["lone_send_trigger"])
        # The log is written ahead up to its size when SQLite starts it again from the top (a
        # checkpoint every WAL_AUTOCHECKPOINT pages): see GroupCommitter.
        self.committer = GroupCommitter(
            conn, str(path), on_end=self._transaction_ended, log_ahead=checkpointed_log_size(conn)
        )
        self._write_conn = conn
        # The lone send's statement runs on a cursor kept for it: Connection.execute makes and drops
        # one per call. Only the committer's leader uses it, one at a time.
        self._lone_cursor = conn.cursor()
        # What the counts read of the next lone send would return before that send's own rows, kept
        # from the last one while nothing else has written the shard since (see _insert_one).
        self._counts: _Counts | None = None
        self._counts_pending: _Counts | None = None
        self._reader = open_database(path, SCHEMA, create=False, version=SCHEMA_VERSION, upgrades=UPGRADES)
        self._read_lock = threading.Lock()
        self._seen_version = -1

    def close(self) -> None:
        with self._read_lock:
            self._reader.close()
        self.committer.close()
        self._write_conn.close()

    # -- writes -------------------------------------------------------------------------------
    def insert(
        self,
        rows: Sequence[InsertRow],
        visible_at: int | Sequence[int],
        nbytes: int,
        *,
        sent: bool = True,
        committed: Callable[[], None] | None = None,
    ) -> tuple[int, int, int]:
        """Store ``rows``, visible from ``visible_at`` (one time for all, or one each); returns the
        shard's backlog count, bytes and oldest timestamp, once they are durable.

        ``sent=False`` marks messages moved in from another queue rather than sent. ``committed``
        is called once they are committed (readers see them), before the flush. Concurrent stores
        that share a commit are stored together, by one call of :meth:`_insert_many`.
        """
        item = (rows, visible_at, nbytes, sent)
        alone = self._insert_alone if len(rows) == 1 and sent else None
        result: tuple[int, int, int] = self.committer.run_batched(
            self._insert_many, item, committed=committed, alone=alone
        )
        return result

    def _insert_alone(self, c: sqlite3.Connection, item: _Store) -> tuple[int, int, int] | object:
        """A lone send with no other writer queued, as one autocommitted statement (the ``lone_send``
        trigger: payload and state row, no BEGIN or COMMIT of ours), when the counts it returns
        follow from the last lone send's: this connection changed nothing since (its total
        changes), the send does not fold (every :data:`FOLD_EVERY`), and no other connection has
        committed since, which the trigger checks under the statement's write lock and else
        refuses, changing nothing. ``DECLINED`` otherwise: :meth:`_insert_one`'s way, in a
        transaction, reads the counts. A queue is deleted by a commit (``mark_deleted``, here or
        in another process), so the last lone send's check that it was not still holds when
        nothing has committed since."""
        last = self._counts
        if last is None or last[0] != c.total_changes or last[5] + 1 >= FOLD_EVERY:
            return DECLINED
        rows, visible_at, _, _ = item
        mid, timestamp, content_type, body = rows[0]
        visible = visible_at if isinstance(visible_at, int) else visible_at[0]
        try:
            self._lone_cursor.execute(LONE_SEND, (mid, timestamp, content_type, body, visible, last[1]))
        except sqlite3.IntegrityError as exc:
            if "the shard changed" in str(exc):
                return DECLINED
            raise
        count, stored_bytes, oldest = last[2] + 1, last[3] + len(body), last[4] or timestamp
        self._counts_pending = (c.total_changes, last[1], count, stored_bytes, oldest, last[5] + 1)
        return count, stored_bytes, oldest

    def _insert_many(self, c: sqlite3.Connection, items: list[_Store]) -> list[tuple[int, int, int]]:
        """Store several calls' rows in one go: one count, one statement per call for the payloads,
        one for all the state rows. Every call gets the metrics after all of them."""
        if len(items) == 1 and len(items[0][0]) == 1 and items[0][3]:
            return [self._insert_one(c, *items[0])]
        n = sum(len(rows) for rows, _, _, _ in items)
        sent = sum(len(rows) for rows, _, _, was_sent in items if was_sent)
        counts = c.execute(Q["count_in"], {"n": n, "bytes": sum(size for _, _, size, _ in items), "sent": sent})
        row = counts.fetchone()
        if row is None:
            raise QueueNotFound("the queue was deleted while this message was being sent")
        # SQLite numbers new rows from the largest seq on, one by one: the rows' seqs are first,
        # first + 1, ... in the order they are stored.
        count, nbytes, first, oldest = row
        visible: list[int] = []
        for rows, visible_at, _, was_sent in items:
            c.executemany(Q["insert_payload" if was_sent else "insert_moved_payload"], rows)
            visible.extend([visible_at] * len(rows) if isinstance(visible_at, int) else visible_at)
        if len(set(visible)) == 1:
            c.execute(Q["insert_states"], {"first": first, "visible_at": visible[0]})
        else:
            c.execute(Q["insert_states_each"], {"first": first, "visible_at": orjson.dumps(visible).decode()})
        earliest = min(ts for rows, _, _, _ in items for _, ts, _, _ in rows)
        metrics = (count, nbytes, earliest if oldest is None else min(oldest, earliest))
        return [metrics] * len(items)

    def _insert_one(
        self, c: sqlite3.Connection, rows: Sequence[InsertRow], visible_at: int | Sequence[int], nbytes: int, sent: bool
    ) -> tuple[int, int, int]:
        """One message sent alone (the lone ``send()``): its payload, then its state by the payload's
        rowid (fresh, out of the time index, when it is deliverable at once), then the counts, which
        include it uncounted (shard.sql): the ``stats`` row's page stays out of the commit but once
        every :data:`FOLD_EVERY` sends. A batch's path reads the largest seq first and finds its
        payloads again to make their states.

        The counts are read from the file only when the shard may have changed since the last lone
        send committed: while no other connection has committed (``PRAGMA data_version``, read in
        this transaction, whose write lock keeps every other writer out until it commits) and this
        connection has changed nothing else (its total changes), they are that send's plus this
        one. Whatever else happened, even in another process, costs one read."""
        row = rows[0]
        before = c.total_changes
        seq = c.execute(Q["insert_payload"], row).lastrowid
        visible = visible_at if isinstance(visible_at, int) else visible_at[0]
        size = len(row[3])
        c.execute(Q["insert_state"], {"seq": seq, "visible_at": visible, "size": size, "fresh": visible <= row[1]})
        (version,) = c.execute("PRAGMA data_version").fetchone()
        last = self._counts
        if last is not None and last[0] == before and last[1] == version:
            # The rows just stored are the largest seq: the oldest changes only in an empty shard.
            count, stored_bytes, oldest, uncounted = last[2] + 1, last[3] + size, last[4] or row[1], last[5] + 1
        else:
            count, stored_bytes, oldest, uncounted, deleted = c.execute(Q["stored_metrics"]).fetchone()
            if deleted:
                raise QueueNotFound("the queue was deleted while this message was being sent")
        if uncounted >= FOLD_EVERY:
            _fold(c)
            uncounted = 0
        self._counts_pending = (c.total_changes, version, count, stored_bytes, oldest, uncounted)
        return count, stored_bytes, oldest

    def _transaction_ended(self, committed: bool) -> None:
        """The committer's word after each transaction (in the writer's thread, before the next one
        begins): a lone send's counts hold from its commit on; anything else drops them."""
        pending, self._counts_pending = self._counts_pending, None
        self._counts = pending if committed else None

    def lease(self, now_ms: int, n: int, until_ms: int, token: int) -> list[LeasedRow]:
        return self.committer.run(lambda c: _lease(c, now_ms, n, until_ms, token), durable=False)

    def extend(self, leases: LeaseGroup, until_ms: int) -> None:
        def op(c: sqlite3.Connection) -> None:
            for token, seqs in leases.by_token().items():
                c.execute(Q["extend"], {"until": until_ms, "token": token, "seqs": _seqs(seqs)})

        self.committer.run(op, durable=False)

    def release(self, leases: LeaseGroup, now_ms: int) -> None:
        def op(c: sqlite3.Connection) -> None:
            for token, seqs in leases.by_token().items():
                c.execute(Q["release"], {"now": now_ms, "token": token, "seqs": _seqs(seqs)})

        self.committer.run(op, durable=False)

    def settle(
        self, acks: LeaseGroup, retries: LeaseGroup, max_deliveries: int, *, durable: bool = True
    ) -> ShardSettlement:
        """Acks and retries in one commit (not waiting for its flush if not ``durable``). Retried
        messages past ``max_deliveries`` are returned in ``exhausted``, still stored under their
        leases, for the engine to dead-letter or drop."""
        return self.committer.run(lambda c: self._settle(c, acks, retries, max_deliveries), durable=durable)

    def settle_and_lease(
        self,
        acks: LeaseGroup,
        retries: LeaseGroup,
        max_deliveries: int,
        now_ms: int,
        n: int,
        until_ms: int,
        token: int,
        *,
        durable: bool = True,
    ) -> tuple[ShardSettlement, list[LeasedRow]]:
        """:meth:`settle`, then :meth:`lease`, in one commit."""

        def op(c: sqlite3.Connection) -> tuple[ShardSettlement, list[LeasedRow]]:
            return self._settle(c, acks, retries, max_deliveries), _lease(c, now_ms, n, until_ms, token)

        return self.committer.run(op, durable=durable)

    def _settle(
        self, c: sqlite3.Connection, acks: LeaseGroup, retries: LeaseGroup, max_deliveries: int
    ) -> ShardSettlement:
        out = ShardSettlement()
        gone_bytes = 0
        if acks:
            _fold(c)
        for token, seqs in acks.by_token().items():
            done = c.execute(Q["ack"], {"token": token, "seqs": _seqs(seqs)}).fetchall()
            out.acked += len(done)
            gone_bytes += sum(size for _, size in done)
            self._warn(c, token, seqs, {seq for seq, _ in done}, out.warnings)
        for (token, visible_at), seqs in retries.by_token_and_time().items():
            args = {"visible_at": visible_at, "token": token, "seqs": _seqs(seqs)}
            moved = {seq for (seq,) in c.execute(Q["retry"], {**args, "max_deliveries": max_deliveries})}
            out.retried += len(moved)
            rest = [seq for seq in seqs if seq not in moved]
            if not rest:
                continue
            held = {seq for (seq,) in c.execute(Q["held"], {"token": token, "seqs": _seqs(rest)})}
            for seq in held:
                out.exhausted.add(seq, token)
            self._warn(c, token, rest, held, out.warnings)
        if out.acked:
            _count_out(c, out.acked, gone_bytes, acked=out.acked)
        if out.retried:
            c.execute(Q["count_retried"], {"n": out.retried})
        return out

    @staticmethod
    def _warn(
        c: sqlite3.Connection,
        token: int,
        asked: list[int],
        done: set[int],
        warnings: dict[tuple[int, int], str],
    ) -> None:
        missed = [seq for seq in asked if seq not in done]
        if not missed:
            return
        current = dict(c.execute(Q["lease_of"], {"seqs": _seqs(missed)}).fetchall())
        for seq in missed:
            warnings[(token, seq)] = MISSING if seq not in current else SUPERSEDED

    def leased_rows(self, leases: LeaseGroup) -> list[Row]:
        """The messages still held under the given leases, payloads and all (to copy them elsewhere)."""
        rows: list[Row] = []
        for token, seqs in leases.by_token().items():
            rows.extend(self._read(Q["leased_payloads"], {"token": token, "seqs": _seqs(seqs)}))
        return rows

    def remove_leased(self, leases: LeaseGroup, *, dead_lettered: bool) -> int:
        """Delete messages still held under their leases (after they were copied elsewhere, or to
        drop them)."""

        def op(c: sqlite3.Connection) -> int:
            count = nbytes = 0
            _fold(c)
            for token, seqs in leases.by_token().items():
                rows = c.execute(Q["take_leased"], {"token": token, "seqs": _seqs(seqs)}).fetchall()
                count, nbytes = count + len(rows), nbytes + sum(size for _, size in rows)
            moved = count if dead_lettered else 0
            _count_out(c, count, nbytes, dead_lettered=moved, dropped=count - moved)
            return count

        return self.committer.run(op)

    def remove(self, seqs: Sequence[int]) -> int:
        """Delete messages by sequence number, whatever their state (redrive moved them)."""

        def op(c: sqlite3.Connection) -> int:
            _fold(c)
            sizes = c.execute(Q["remove"], {"seqs": _seqs(seqs)}).fetchall()
            _count_out(c, len(sizes), sum(s for (s,) in sizes))
            return len(sizes)

        return self.committer.run(op)

    def purge(self) -> int:
        """Delete every message, then give the write-ahead log's space back to the disk if no one is
        reading it. The delete trigger is set aside meanwhile so that SQLite empties the table whole
        (a few pages written) instead of row by row (every page of it), which a full disk's reserve
        could not hold for a large queue."""

        def op(c: sqlite3.Connection) -> int:
            _fold(c)  # the purged sends still count as sent
            c.execute(Q["purge_payloads"])
            (trigger,) = c.execute(Q["delete_trigger"]).fetchone()
            c.execute(Q["drop_delete_trigger"])
            count = c.execute(Q["purge"]).rowcount
            c.execute(trigger)
            c.execute(Q["purge_counts"])
            return int(count)

        count = self.committer.run(op)
        self.checkpoint()
        return count

    def checkpoint(self) -> None:
        """Copy the write-ahead log into the file and truncate it, if no reader holds it (best effort:
        on a full disk the copy may not fit)."""
        with self._read_lock, contextlib.suppress(sqlite3.Error):
            self._reader.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def expire(self, cutoff_ms: int) -> int:
        def op(c: sqlite3.Connection) -> int:
            _fold(c)
            sizes = c.execute(Q["expire"], {"cutoff": cutoff_ms}).fetchall()
            if sizes:
                _count_out(c, len(sizes), sum(s for (s,) in sizes), expired=len(sizes))
            return len(sizes)

        return self.committer.run(op)

    def mark_deleted(self) -> None:
        """Tombstone the shard so that no process can store into it any more."""
        self.committer.run(lambda c: c.execute(Q["mark_deleted"]))

    # -- reads --------------------------------------------------------------------------------
    def _read(self, sql: str, args: dict[str, int | str] | None = None) -> list[tuple[Any, ...]]:
        with self._read_lock:
            try:
                return self._reader.execute(sql, args or {}).fetchall()
            except sqlite3.Error as exc:
                raise translate_error(exc, str(self.path)) from None

    def stats(self) -> tuple[int, ...]:
        return self._read(Q["stats"])[0]

    def oldest(self) -> int:
        return self._read(Q["oldest"])[0][0] or 0

    def peek(self, n: int) -> list[LeasedRow]:
        return self._read(Q["peek"], {"n": n})

    def oldest_rows(self, n: int) -> list[Row]:
        return self._read(Q["oldest_rows"], {"n": n})

    def next_visible(self) -> int | None:
        value = self._read(Q["next_visible"])[0][0]
        return None if value is None else int(value)

    def in_flight(self, now_ms: int) -> int:
        return int(self._read(Q["in_flight"], {"now": now_ms})[0][0])

    def changed(self) -> bool:
        """Whether any process committed to this shard since the last call (cheap: no disk read)."""
        version = int(self._read("PRAGMA data_version")[0][0])
        changed = version != self._seen_version
        self._seen_version = version
        return changed
