"""Shards: a queue may have several storage shards; a batch never spans shards, and consumers
drain every shard."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

import conveyor
from tests.conformance.support import Deliveries, backlog, consume, shard_of_messages


@pytest.fixture
def sharded(conveyor_client: conveyor.Conveyor) -> conveyor.Queue:
    return conveyor_client.create_queue("q", shards=2)


def fill_both_shards(conveyor_client: conveyor.Conveyor, second_client: conveyor.Conveyor) -> list[str]:
    """Two connections (two producers, two home shards) each send batches; returns the bodies."""
    sent: list[str] = []
    for producer, client in (("a", conveyor_client), ("b", second_client)):
        q = client.queue("q")
        for batch in range(3):
            bodies = [f"{producer}{batch}-{i}" for i in range(5)]
            q.send_batch([{"body": b} for b in bodies])
            sent += bodies
        q.send(f"{producer}-single")
        sent.append(f"{producer}-single")
    return sent


def test_queue_reports_its_shard_count(sharded: conveyor.Queue) -> None:
    assert sharded.info().shards == 2


@pytest.mark.parametrize("shards", [0, 17])
def test_shard_count_out_of_range_is_refused(conveyor_client: conveyor.Conveyor, shards: int) -> None:
    with pytest.raises(conveyor.InvalidSetting, match=f"shards is {shards}"):
        conveyor_client.create_queue("q", shards=shards)
    assert conveyor_client.list_queues() == []


def test_a_batch_never_spans_shards_and_producers_use_both(
    conveyor_client: conveyor.Conveyor,
    second_client: conveyor.Conveyor,
    sharded: conveyor.Queue,
    tmp_path: Path,
) -> None:
    fill_both_shards(conveyor_client, second_client)
    shard_of = shard_of_messages(conveyor_client, sharded, tmp_path / "data")
    sharded.add_pull_consumer()
    body_shard = {m.body: shard_of[m.id] for m in sharded.pull(batch_size=100)}
    assert len(body_shard) == 32
    for producer in "ab":
        for batch in range(3):
            assert len({body_shard[f"{producer}{batch}-{i}"] for i in range(5)}) == 1
    assert set(body_shard.values()) == {0, 1}


def test_metrics_sum_over_shards(
    conveyor_client: conveyor.Conveyor, second_client: conveyor.Conveyor, sharded: conveyor.Queue
) -> None:
    sent = fill_both_shards(conveyor_client, second_client)
    assert backlog(sharded) == (len(sent), sum(len(b) + 2 for b in sent))
    assert len(sharded.peek(batch_size=100)) == len(sent)


def test_sent_count_sums_over_shards_and_matches_the_counters(
    conveyor_client: conveyor.Conveyor, second_client: conveyor.Conveyor, sharded: conveyor.Queue
) -> None:
    sent = fill_both_shards(conveyor_client, second_client)
    sharded.add_pull_consumer()
    sharded.pull(batch_size=5)  # in flight: counted by counters(), not needed for the sent count
    assert conveyor_client.engine.sent_count(sharded.id) == len(sent) == sharded.counters().sent


def test_pull_consumer_drains_every_shard(
    conveyor_client: conveyor.Conveyor, second_client: conveyor.Conveyor, sharded: conveyor.Queue
) -> None:
    sent = fill_both_shards(conveyor_client, second_client)
    sharded.add_pull_consumer()
    got: list[str] = []
    while batch := sharded.pull(batch_size=7):
        got += [m.body for m in batch]
        assert sharded.ack(acks=[m.lease_id for m in batch]).ack_count == len(batch)
    assert sorted(got) == sorted(sent)
    assert backlog(sharded) == (0, 0)


def test_push_consumer_drains_every_shard(
    conveyor_client: conveyor.Conveyor, second_client: conveyor.Conveyor, sharded: conveyor.Queue
) -> None:
    sent = fill_both_shards(conveyor_client, second_client)
    seen = Deliveries()
    consume(conveyor_client, "q", seen.record, max_batch_size=10)
    assert sorted(seen.attempts) == sorted(sent)
    assert backlog(sharded) == (0, 0)


def test_purge_empties_every_shard(
    conveyor_client: conveyor.Conveyor, second_client: conveyor.Conveyor, sharded: conveyor.Queue
) -> None:
    sent = fill_both_shards(conveyor_client, second_client)
    assert sharded.purge() == len(sent)
    assert sharded.metrics() == conveyor.Metrics(0, 0, 0)


def test_leases_from_many_threads_take_turns_over_every_shard(
    conveyor_client: conveyor.Conveyor,
    second_client: conveyor.Conveyor,
    sharded: conveyor.Queue,
) -> None:
    threads, leases_each = 8, 25
    for client in (conveyor_client, second_client):  # two producers: both home shards filled
        for _ in range(threads * leases_each // 100):
            client.queue("q").send_batch([{"body": n} for n in range(100)])
    sharded.add_pull_consumer()
    shards: Counter[str] = Counter()
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def pull_one_at_a_time() -> None:
        start.wait()
        for _ in range(leases_each):
            (message,) = sharded.pull(batch_size=1)
            with lock:
                shards[message.lease_id.split("-")[0]] += 1

    workers = [threading.Thread(target=pull_one_at_a_time) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    # Each lease starts at the next shard: consecutive leases, from whichever thread, alternate.
    assert shards == {"0": threads * leases_each // 2, "1": threads * leases_each // 2}
