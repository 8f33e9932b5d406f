"""How push consumers deliver: batch assembly, wake-ups on new sends, lease heartbeats."""

from __future__ import annotations

import threading
import time

import conveyor
from tests.conformance.support import Deliveries, FakeClock, backlog, consume, wait_for


def test_batches_fill_to_max_batch_size_and_a_partial_one_goes_after_max_batch_timeout(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue
) -> None:
    queue.send_batch([{"body": i} for i in range(10)])
    seen = Deliveries()
    consume(conveyor_client, "q", seen.record, max_batch_size=4, max_batch_timeout=0.3, max_concurrency=1)
    assert sorted(seen.batch_sizes) == [2, 4, 4]
    assert sorted(seen.attempts) == list(range(10))


def test_message_sent_while_the_consumer_runs_is_delivered(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue
) -> None:
    seen = Deliveries()
    app = conveyor.App(conveyor_client)
    app.consumer("q", max_batch_timeout=0)(seen.record)
    app.start()
    try:
        time.sleep(0.2)  # the dispatcher is now idle, waiting for messages
        queue.send("late")
        wait_for(lambda: "late" in seen.attempts)
    finally:
        app.stop(grace=5)
    assert seen.attempts == {"late": [1]}
    assert backlog(queue) == (0, 0)


def test_running_handler_keeps_its_lease_past_the_visibility_timeout(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue
) -> None:
    seen = Deliveries()
    queue.send("long")

    def handler(batch: conveyor.MessageBatch) -> None:
        seen.record(batch)
        time.sleep(1.6)  # four visibility timeouts: only the heartbeat keeps the lease

    consume(conveyor_client, "q", handler, visibility_timeout_ms=400)
    assert seen.attempts == {"long": [1]}
    assert queue.counters().acked == 1


def test_each_consumer_sees_only_its_own_queue(conveyor_client: conveyor.Conveyor) -> None:
    seen = {name: Deliveries() for name in ("a", "b")}
    app = conveyor.App(conveyor_client)
    for name in seen:
        conveyor_client.create_queue(name).send_batch([{"body": f"{name}{i}"} for i in range(3)])
        app.consumer(name, max_batch_timeout=0)(seen[name].record)
    assert app.drain(20)
    assert sorted(seen["a"].attempts) == ["a0", "a1", "a2"]
    assert sorted(seen["b"].attempts) == ["b0", "b1", "b2"]


def test_handler_may_ack_from_another_thread_before_returning(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue
) -> None:
    seen = Deliveries()
    queue.send_batch([{"body": 1}, {"body": 2}])

    def handler(batch: conveyor.MessageBatch) -> None:
        seen.record(batch)
        if batch.messages[0].attempts == 1:
            worker = threading.Thread(target=batch.messages[0].ack)
            worker.start()
            worker.join()
            raise RuntimeError("the other message is retried")

    consume(conveyor_client, "q", handler, max_batch_size=2)
    assert len(seen.redelivered()) == 1


def test_drain_waits_for_delayed_messages_and_reports_the_timeout(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue
) -> None:
    queue.send("later", delay_seconds=3_600)
    seen = Deliveries()
    app = conveyor.App(conveyor_client)
    app.consumer("q", max_batch_timeout=0)(seen.record)
    assert app.drain(timeout=0.5) is False
    assert seen.attempts == {}
    assert backlog(queue) == (1, 7)


def test_delayed_message_is_pushed_once_its_delay_ends(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue
) -> None:
    queue.send("soon", delay_seconds=1)
    seen = Deliveries()
    consume(conveyor_client, "q", seen.record)
    assert seen.attempts == {"soon": [1]}


def test_dead_letters_reach_the_consumer_of_the_dead_letter_queue(conveyor_client: conveyor.Conveyor) -> None:
    conveyor_client.create_queue("q").send_batch([{"body": "ok"}, {"body": "poison"}])
    conveyor_client.create_queue("q-dlq")
    dead = Deliveries()

    def handler(batch: conveyor.MessageBatch) -> None:
        for m in batch.messages:
            if m.body == "poison":
                m.retry()

    app = conveyor.App(conveyor_client)
    app.consumer("q", max_batch_timeout=0, max_retries=1, dead_letter_queue="q-dlq")(handler)
    app.consumer("q-dlq", max_batch_timeout=0)(dead.record)
    assert app.drain(20)
    assert dead.attempts == {"poison": [1]}
    assert conveyor_client.queue("q").counters().dead_lettered == 1


def test_graceful_stop_releases_unstarted_messages_without_counting_a_delivery(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue, clock: FakeClock
) -> None:
    queue.send_batch([{"body": i} for i in range(3)])
    seen = Deliveries()
    app = conveyor.App(conveyor_client)
    # A batch of 10 waits up to 60 s to fill: the 3 messages stay leased but unstarted.
    app.consumer("q", max_batch_size=10, max_batch_timeout=60)(seen.record)
    app.start()
    try:
        wait_for(lambda: queue.counters().in_flight == 3)
    finally:
        app.stop(grace=5)
    assert seen.attempts == {}
    queue.remove_consumer()
    queue.add_pull_consumer()
    # Back at once (the clock has not moved), and this is their first delivery.
    assert sorted((m.body, m.attempts) for m in queue.pull(batch_size=10)) == [(0, 1), (1, 1), (2, 1)]
