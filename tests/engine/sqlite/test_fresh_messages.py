"""A message stored deliverable at once and never delivered is *fresh* (schema version 4): it has
no entry in the ``messages_visible`` index, so a lone send writes two pages, and leases find it by
seq from ``stats.fresh_from``. Leases and peeks still see every message in time order, whatever mix
of fresh, delayed, retried and released messages the shard holds, and deletes of the highest seqs
(which SQLite gives out again) never hide a later send."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from conveyor.engine.sqlite.engine import SQLiteEngine
from conveyor.model import DeliveryPolicy, NewMessage, QueueSettings
from tests.conformance.support import FakeClock

POLICY = DeliveryPolicy()


def _message(body: str, delay: float | None = None) -> NewMessage:
    return NewMessage(body.encode(), "text", delay)


def _shard(directory: Path, queue_id: str) -> sqlite3.Connection:
    return sqlite3.connect(directory / "shards" / f"{queue_id}.0.db")


def test_a_lone_send_is_not_indexed_until_it_is_leased(tmp_path: Path) -> None:
    engine = SQLiteEngine(tmp_path, clock=FakeClock(1_700_000_000_000))
    queue_id = engine.create_queue("jobs", QueueSettings()).queue_id
    for body in ("a", "b", "c"):
        engine.enqueue(queue_id, [_message(body)])
    engine.enqueue(queue_id, [_message("later", delay=5)])
    shard = _shard(tmp_path, queue_id)
    indexed = "SELECT count(*) FROM messages INDEXED BY messages_visible WHERE fresh = 0 AND visible_at_ms >= 0"
    assert shard.execute(indexed).fetchone() == (1,)  # only the delayed one
    assert shard.execute("SELECT count(*) FROM messages WHERE fresh = 1").fetchone() == (3,)

    leased = engine.lease(queue_id, 2, 30_000, POLICY)
    assert [m.body for m in leased] == [b"a", b"b"]
    assert shard.execute(indexed).fetchone() == (3,)
    assert shard.execute("SELECT fresh_from FROM stats").fetchone() == (3,)  # "c", the first fresh one left
    shard.close()
    engine.close()


def test_leases_and_peeks_merge_fresh_delayed_and_retried_messages_in_time_order(tmp_path: Path) -> None:
    clock = FakeClock(1_700_000_000_000)
    engine = SQLiteEngine(tmp_path, clock=clock)
    queue_id = engine.create_queue("jobs", QueueSettings()).queue_id
    engine.enqueue(queue_id, [_message("delayed 2 s", delay=2)])
    engine.enqueue(queue_id, [_message("first")])
    clock.advance(1)
    engine.enqueue(queue_id, [_message("second"), _message("retried")])
    (retried,) = [m for m in engine.lease(queue_id, 2, 30_000, POLICY) if m.body == b"retried"] or [None]
    assert retried is None  # the lease took "first" and "second"
    assert engine.next_visible_ms(queue_id) == clock.now_ms()  # "retried" is deliverable now
    clock.advance(0.5)
    (taken,) = engine.lease(queue_id, 1, 30_000, POLICY)
    assert taken.body == b"retried"
    engine.settle(queue_id, [], [(taken.lease_id, 1)], POLICY)  # visible again 1 s from now
    clock.advance(0.2)
    engine.enqueue(queue_id, [_message("third")])

    assert [m.body for m in engine.peek(queue_id, 10)] == [
        b"third",  # fresh, sent now
        b"delayed 2 s",  # 0.3 s from now
        b"retried",  # 0.8 s from now
        b"first",  # leased for 30 s
        b"second",
    ]
    clock.advance(2)
    taken_one_by_one = [m.body for _ in range(4) for m in engine.lease(queue_id, 1, 30_000, POLICY)]
    assert taken_one_by_one == [b"third", b"delayed 2 s", b"retried"]
    engine.close()


def test_a_send_after_the_highest_seqs_were_acked_is_delivered(tmp_path: Path) -> None:
    engine = SQLiteEngine(tmp_path, clock=FakeClock(1_700_000_000_000))
    queue_id = engine.create_queue("jobs", QueueSettings()).queue_id
    for n in range(5):
        engine.enqueue(queue_id, [_message(f"m{n}")])
    leased = engine.lease(queue_id, 5, 30_000, POLICY)
    # The lease moved fresh_from past seq 5; acking seqs 3-5 frees them, and the next sends get them.
    assert engine.settle(queue_id, [m.lease_id for m in leased[2:]], [], POLICY).acked == 3
    engine.enqueue(queue_id, [_message("again 1")])
    engine.enqueue(queue_id, [_message("again 2"), _message("again 3")])
    assert [m.body for m in engine.lease(queue_id, 10, 30_000, POLICY)] == [b"again 1", b"again 2", b"again 3"]
    engine.settle(queue_id, [m.lease_id for m in leased[:2]], [], POLICY)
    assert engine.purge(queue_id) == 3
    engine.enqueue(queue_id, [_message("after the purge")])
    assert [m.body for m in engine.lease(queue_id, 10, 30_000, POLICY)] == [b"after the purge"]
    engine.close()


def test_a_released_message_stays_indexed_and_is_delivered_again(tmp_path: Path) -> None:
    clock = FakeClock(1_700_000_000_000)
    engine = SQLiteEngine(tmp_path, clock=clock)
    queue_id = engine.create_queue("jobs", QueueSettings()).queue_id
    engine.enqueue(queue_id, [_message("one")])
    (first,) = engine.lease(queue_id, 1, 30_000, POLICY)
    clock.advance(0.1)
    engine.enqueue(queue_id, [_message("two")])
    clock.advance(0.1)
    engine.release(queue_id, [first.lease_id])  # back at once, its delivery not counted
    again = [m for _ in range(3) for m in engine.lease(queue_id, 1, 30_000, POLICY)]
    assert [(m.body, m.attempts) for m in again] == [(b"two", 1), (b"one", 1)]  # "one" visible from its release
    engine.close()
