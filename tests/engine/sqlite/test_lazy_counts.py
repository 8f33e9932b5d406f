"""A lone send leaves the shard's ``stats`` row alone (schema version 3): the sends past
``counted_through`` are added on every read of the counts, folded into the row every
``FOLD_EVERY`` sends and before anything deletes. The counts stay exact whatever comes between,
including deletes of the highest seqs, which SQLite gives out again."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import cast

import pytest
from click.testing import CliRunner

import conveyor
from conveyor.cli.main import cli
from conveyor.engine.sqlite import SQLiteEngine
from conveyor.engine.sqlite.shard import FOLD_EVERY


def _row(data_dir: Path, queue_id: str) -> tuple[int, int, int, int]:
    conn = sqlite3.connect(data_dir / "shards" / f"{queue_id}.0.db")
    try:
        row = conn.execute("SELECT backlog_count, backlog_bytes, sent, counted_through FROM stats").fetchone()
    finally:
        conn.close()
    return row  # type: ignore[no-any-return]


def test_lone_sends_are_counted_on_read_and_folded_in_every_few_dozen(data_dir: Path) -> None:
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        q = cv.create_queue("jobs")
        for i in range(FOLD_EVERY - 1):
            result = q.send("x" * (i + 1), content_type="text")
            assert result.metrics.backlog_count == i + 1
            assert result.metrics.backlog_bytes == (i + 1) * (i + 2) // 2
        assert _row(data_dir, q.id) == (0, 0, 0, 0)  # nothing written to the row yet
        assert q.counters().sent == FOLD_EVERY - 1
        q.send("x" * FOLD_EVERY, content_type="text")  # this one folds them all in
        total = FOLD_EVERY * (FOLD_EVERY + 1) // 2
        assert _row(data_dir, q.id) == (FOLD_EVERY, total, FOLD_EVERY, FOLD_EVERY)
        assert (q.metrics().backlog_count, q.metrics().backlog_bytes) == (FOLD_EVERY, total)


def test_counts_stay_exact_when_deletes_free_the_highest_seqs(data_dir: Path) -> None:
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        q = cv.create_queue("jobs")
        q.add_pull_consumer(visibility_timeout_ms=60_000)
        for n in range(5):
            q.send({"n": n})
        pulled = q.pull(batch_size=5)
        # Acking the newest three frees seqs 3-5, which the next sends get again: they must count.
        assert q.ack(acks=[m.lease_id for m in pulled[2:]]).ack_count == 3
        assert _row(data_dir, q.id)[3] == 2
        for n in range(4):
            assert q.send({"n": 10 + n}).metrics.backlog_count == 3 + n
        assert q.metrics().backlog_count == 6
        counters = q.counters()
        assert (counters.sent, counters.acked) == (9, 3)
        # Everything acked, then sends into the empty shard (seq 1 again), then a batch after them.
        rest = pulled[:2] + q.pull(batch_size=10)
        assert q.ack(acks=[m.lease_id for m in rest]).ack_count == 6
        assert q.metrics().backlog_count == 0
        q.send({"n": 20})
        q.send_batch([{"body": {"n": 21}}, {"body": {"n": 22}}])
        q.send({"n": 23})
        assert q.metrics().backlog_count == 4
        assert q.counters().sent == 13
        assert [m.body["n"] for m in q.peek(10)] == [20, 21, 22, 23]


def test_expiry_dead_letters_and_purge_count_the_uncounted_sends(data_dir: Path) -> None:
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        q = cv.create_queue("jobs")
        q.add_pull_consumer(visibility_timeout_ms=60_000, max_retries=0, dead_letter_queue="dead")
        for n in range(3):
            q.send({"n": n})
        (first,) = q.pull(batch_size=1)
        q.ack(retries=[first.lease_id])  # no retries left: dead-lettered, moved into "dead"
        dead = cv.queue("dead")
        assert (q.metrics().backlog_count, dead.metrics().backlog_count) == (2, 1)
        assert (q.counters().sent, q.counters().dead_lettered, dead.counters().sent) == (3, 1, 0)
        dead.send({"n": "own"})
        assert dead.metrics().backlog_count == 2 and dead.counters().sent == 1
        assert q.purge() == 2
        assert (q.metrics().backlog_count, q.counters().sent) == (0, 3)
        q.send({"n": 9})
        assert (q.metrics().backlog_count, q.counters().sent) == (1, 4)


def test_doctor_counts_the_uncounted_sends_in_the_backlog(data_dir: Path) -> None:
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        q = cv.create_queue("jobs")
        q.send_batch([{"body": n} for n in range(3)])  # counted in the row
        for n in range(5):
            q.send(n)  # counted on read
        queue_id = q.id
    assert _row(data_dir, queue_id)[0] == 3
    result = CliRunner().invoke(cli, ["--url", f"sqlite://{data_dir}", "doctor", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stdout
    (queue,) = json.loads(result.stdout)["queues"]
    assert queue["backlog"] == 8


def test_a_send_counts_what_other_processes_and_this_one_did_since_the_last_send(data_dir: Path) -> None:
    """A lone send takes its counts from the previous one's while nothing else wrote the shard
    (``Shard._insert_one``); a send, ack or lease by another process on the same shard, or any
    other write of this process, must make it read them again. Each send's metrics are checked
    against a read of the file made right after it (nothing writes in between)."""
    from tests.engine.sqlite.test_catalog_snapshot import Peer

    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        q = cv.create_queue("jobs")

        def send(body: object) -> int:
            metrics = q.send(body).metrics
            assert metrics == q.metrics()
            return metrics.backlog_count

        peer = Peer(data_dir, "jobs")
        try:
            expected = 0
            for round_ in range(3):
                for _ in range(FOLD_EVERY + 3):  # past a fold, an UPDATE of this process's
                    expected += 1
                    assert send({"n": expected, "pad": "x" * expected}) == expected
                assert peer.ask("send") == "sent"
                assert send("after the peer's send") == expected + 2
                assert peer.ask("ack 5") == 5  # the oldest five: the oldest timestamp moves
                expected += 2 - 5 + 1
                assert send({"after": "acks"}) == expected
                assert cast(int, peer.ask("lease")) >= 1  # a lease changes no count
                expected += 1
                assert send({"after": "lease"}) == expected
                if round_ == 1:
                    assert q.purge() == expected  # this process's own write, on another path
                    expected = 0
            assert q.counters().sent == 3 * (FOLD_EVERY + 3 + 4)
        finally:
            peer.stop()


def test_a_lone_send_after_another_connection_wrote_reads_the_counts_again(data_dir: Path) -> None:
    """A lone send is one autocommitted statement only while the counts it returns follow from the
    last one's; after any other connection's commit its trigger refuses, storing nothing, and the
    send is made the long way (counts read in its transaction). A queue marked deleted meanwhile
    refuses the send and keeps nothing of it."""
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        q = cv.create_queue("jobs")
        for i in range(5):
            assert q.send({"n": i}).metrics == q.metrics()
        committer = cast(SQLiteEngine, cv.engine.deployment_engine()).router.all(q.id)[0].committer
        # The first reads the counts and the second writes the new log ahead, the long way.
        alone = committer.alone_commits
        assert alone == 3
        other = sqlite3.connect(data_dir / "shards" / f"{q.id}.0.db", isolation_level=None)
        try:
            other.execute("UPDATE stats SET backlog_count = backlog_count + 100")  # a miscount, on purpose
            assert q.send({"n": 5}).metrics.backlog_count == 106
            assert committer.alone_commits == alone  # refused by the trigger: the long way
            assert q.send({"n": 6}).metrics.backlog_count == 107
            assert committer.alone_commits == alone + 1
            other.execute("UPDATE stats SET deleted = 1")
            with pytest.raises(conveyor.QueueNotFound):
                q.send({"n": 7})
            assert other.execute("SELECT count(*) FROM payloads").fetchone() == (7,)
            assert other.execute("SELECT count(*) FROM messages").fetchone() == (7,)
        finally:
            other.close()
