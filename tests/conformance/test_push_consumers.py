"""Push consumers (``conveyor.App``): Cloudflare's ``queue(batch)`` handler contract."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

import pytest

import conveyor
from conveyor import limits
from tests.conformance.support import Deliveries, FakeClock, backlog, consume, release_schedule, run_until, wait_for


def test_handler_that_returns_acks_every_message(conveyor_client: conveyor.Conveyor, queue: conveyor.Queue) -> None:
    seen = Deliveries()
    queue.send_batch([{"body": i} for i in range(25)])
    consume(conveyor_client, "q", seen.record, max_batch_size=10)
    assert sorted(seen.attempts) == list(range(25))
    assert seen.redelivered() == set()
    assert max(seen.batch_sizes) <= 10
    assert backlog(queue) == (0, 0)
    assert queue.counters().acked == 25


def test_message_and_batch_carry_cloudflare_fields(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue, clock: FakeClock
) -> None:
    sent_at = clock.now_ms()
    queue.send("hi", content_type="text")
    batches: list[conveyor.MessageBatch] = []
    backlogs: list[int] = []

    def handle(batch: conveyor.MessageBatch) -> None:
        batches.append(batch)
        backlogs.append(batch.metadata.metrics.backlog_count)  # read when the handler asks

    consume(conveyor_client, "q", handle)
    [batch] = batches
    [m] = batch.messages
    assert batch.queue == "q"
    assert limits.ID_PATTERN.match(m.id)
    assert (m.body, m.content_type, m.attempts) == ("hi", "text", 1)
    assert m.timestamp.timestamp() * 1000 == pytest.approx(sent_at)
    assert backlogs == [1]  # the message is in the backlog until acked
    assert batch.metadata.metrics.backlog_count == 1  # and the batch keeps what its handler read


def test_handler_exception_retries_all_but_explicit_acks(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue
) -> None:
    seen = Deliveries()
    queue.send_batch([{"body": b} for b in ("acked", "retried-1", "retried-2")])

    def handler(batch: conveyor.MessageBatch) -> None:
        seen.record(batch)
        if batch.messages[0].attempts == 1:
            next(m for m in batch.messages if m.body == "acked").ack()
            raise RuntimeError("boom")

    consume(conveyor_client, "q", handler, max_batch_size=3)
    assert seen.attempts == {"acked": [1], "retried-1": [1, 2], "retried-2": [1, 2]}
    assert backlog(queue) == (0, 0)


def test_ack_all_then_exception_retries_nothing(conveyor_client: conveyor.Conveyor, queue: conveyor.Queue) -> None:
    seen = Deliveries()
    queue.send_batch([{"body": i} for i in range(3)])

    def handler(batch: conveyor.MessageBatch) -> None:
        seen.record(batch)
        batch.ack_all()
        raise RuntimeError("after ack_all")

    consume(conveyor_client, "q", handler, max_batch_size=3)
    assert seen.redelivered() == set() and len(seen.attempts) == 3
    assert queue.counters().acked == 3


Decide = Callable[[conveyor.MessageBatch], None]


def _ack_then_retry(b: conveyor.MessageBatch) -> None:
    b.messages[0].ack()
    b.messages[0].retry()


def _retry_then_ack(b: conveyor.MessageBatch) -> None:
    b.messages[0].retry()
    b.messages[0].ack()


def _ack_then_retry_all(b: conveyor.MessageBatch) -> None:
    b.messages[0].ack()
    b.retry_all()


def _retry_then_ack_all(b: conveyor.MessageBatch) -> None:
    b.messages[0].retry()
    b.ack_all()


def _ack_all_then_retry_all(b: conveyor.MessageBatch) -> None:
    b.ack_all()
    b.retry_all()


def _retry_all_then_ack_all(b: conveyor.MessageBatch) -> None:
    b.retry_all()
    b.ack_all()


@pytest.mark.parametrize(
    ("decide", "retried"),
    [
        (_ack_then_retry, set()),
        (_retry_then_ack, {0}),
        (_ack_then_retry_all, {1}),
        (_retry_then_ack_all, {0}),
        (_ack_all_then_retry_all, set()),
        (_retry_all_then_ack_all, {0, 1}),
    ],
    ids=lambda v: v.__name__.strip("_") if callable(v) else None,
)
def test_first_call_wins(
    conveyor_client: conveyor.Conveyor,
    queue: conveyor.Queue,
    caplog: pytest.LogCaptureFixture,
    decide: Decide,
    retried: set[int],
) -> None:
    seen = Deliveries()
    queue.send_batch([{"body": 0}, {"body": 1}])

    def handler(batch: conveyor.MessageBatch) -> None:
        seen.record(batch)
        if batch.messages[0].attempts == 1:
            batch.messages.sort(key=lambda m: m.body)
            decide(batch)

    with caplog.at_level(logging.WARNING, logger="conveyor.consumer"):
        consume(conveyor_client, "q", handler, max_batch_size=2)
    assert seen.redelivered() == retried
    assert any("ignored" in r.getMessage() for r in caplog.records)


def test_retry_delay_precedence_message_then_batch_then_consumer(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue, clock: FakeClock
) -> None:
    queue.send_batch([{"body": b} for b in ("message-delay", "consumer-delay", "batch-delay")])

    def handler(batch: conveyor.MessageBatch) -> None:
        by_body = {m.body: m for m in batch.messages}
        by_body["message-delay"].retry(delay_seconds=30)
        by_body["message-delay"].retry(delay_seconds=5)  # ignored: the first call wins
        by_body["consumer-delay"].retry()
        batch.retry_all(delay_seconds=20)

    run_until(conveyor_client, "q", handler, lambda: queue.counters().retried == 3, max_batch_size=3, retry_delay=10)
    queue.remove_consumer()
    queue.add_pull_consumer()
    assert release_schedule(queue, clock, [0, 10, 20, 30]) == {
        "message-delay": 30,
        "consumer-delay": 10,
        "batch-delay": 20,
    }


def test_failed_batch_is_retried_after_the_consumer_retry_delay(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue, clock: FakeClock
) -> None:
    queue.send("m")
    failures: list[int] = []

    def handler(batch: conveyor.MessageBatch) -> None:
        failures.append(1)
        raise RuntimeError("fail")

    run_until(conveyor_client, "q", handler, lambda: bool(failures), retry_delay=10)
    queue.remove_consumer()
    queue.add_pull_consumer()
    assert release_schedule(queue, clock, [10]) == {"m": 10}


def test_failed_batch_without_a_retry_delay_is_retried_at_once(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue, clock: FakeClock
) -> None:
    queue.send("m")
    seen = Deliveries()

    def handler(batch: conveyor.MessageBatch) -> None:
        seen.record(batch)
        if batch.messages[0].attempts == 1:
            raise RuntimeError("fail once")

    consume(conveyor_client, "q", handler)  # the clock never moves: a delay would never end
    assert seen.attempts == {"m": [1, 2]}


def test_attempts_count_every_delivery_then_the_message_is_dropped_and_counted(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue, caplog: pytest.LogCaptureFixture
) -> None:
    seen = Deliveries()
    queue.send("poison")

    def handler(batch: conveyor.MessageBatch) -> None:
        seen.record(batch)
        raise RuntimeError("always")

    with caplog.at_level(logging.WARNING, logger="conveyor.engine"):
        consume(conveyor_client, "q", handler, max_retries=3)
    assert seen.attempts == {"poison": [1, 2, 3, 4]}
    assert queue.counters().dropped == 1
    assert backlog(queue) == (0, 0)
    assert any("dropped" in r.getMessage() for r in caplog.records)


def test_explicit_retries_count_toward_max_retries(conveyor_client: conveyor.Conveyor, queue: conveyor.Queue) -> None:
    seen = Deliveries()
    queue.send("again")

    def handler(batch: conveyor.MessageBatch) -> None:
        seen.record(batch)
        batch.retry_all()

    consume(conveyor_client, "q", handler, max_retries=2)
    assert seen.attempts == {"again": [1, 2, 3]}
    assert queue.counters().dropped == 1


def test_exhausted_message_goes_to_the_dead_letter_queue_created_if_missing(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue, clock: FakeClock
) -> None:
    sent_at = clock.now_ms()
    queue.send("poison")
    seen = Deliveries()

    def handler(batch: conveyor.MessageBatch) -> None:
        seen.record(batch)
        raise RuntimeError("always")

    consume(conveyor_client, "q", handler, max_retries=1, dead_letter_queue="q-dlq")
    assert seen.attempts == {"poison": [1, 2]}
    assert backlog(queue) == (0, 0)
    assert queue.counters().dead_lettered == 1
    dlq = conveyor_client.queue("q-dlq")
    dlq.add_pull_consumer()
    [dead] = dlq.pull()
    assert (dead.id, dead.timestamp_ms, dead.body, dead.attempts) == (seen.messages[0].id, sent_at, "poison", 1)


def test_sync_and_async_handlers_both_work(conveyor_client: conveyor.Conveyor) -> None:
    seen = Deliveries()

    def sync_handler(batch: conveyor.MessageBatch) -> None:
        seen.record(batch)

    async def async_handler(batch: conveyor.MessageBatch) -> None:
        await asyncio.sleep(0)
        seen.record(batch)
        if batch.messages[0].attempts == 1:
            raise RuntimeError("async failure is retried too")

    for name in ("sync", "async"):
        conveyor_client.create_queue(name).send(name)
    app = conveyor.App(conveyor_client)
    app.consumer("sync", max_batch_timeout=0)(sync_handler)
    app.consumer("async", max_batch_timeout=0)(async_handler)
    assert app.drain(20)
    assert seen.attempts == {"sync": [1], "async": [1, 2]}


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_handler_past_its_time_limit_counts_as_a_failure(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue, kind: str
) -> None:
    seen = Deliveries()
    queue.send("slow")

    def sync_handler(batch: conveyor.MessageBatch) -> None:
        seen.record(batch)
        if batch.messages[0].attempts == 1:
            time.sleep(1.5)

    async def async_handler(batch: conveyor.MessageBatch) -> None:
        seen.record(batch)
        if batch.messages[0].attempts == 1:
            await asyncio.sleep(5)

    handler = sync_handler if kind == "sync" else async_handler
    consume(conveyor_client, "q", handler, handler_timeout=0.5, visibility_timeout_ms=3_000)
    assert seen.attempts == {"slow": [1, 2]}
    assert queue.counters().acked == 1


def test_paused_queue_gets_no_push_delivery_until_resumed(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue
) -> None:
    seen = Deliveries()
    queue.pause_delivery()
    queue.send("held")
    app = conveyor.App(conveyor_client)
    app.consumer("q", max_batch_timeout=0)(seen.record)
    app.start()
    try:
        time.sleep(0.6)  # several of the dispatcher's settings refreshes
        assert seen.attempts == {}
        assert queue.counters().in_flight == 0
        queue.resume_delivery()
        wait_for(lambda: bool(seen.attempts))
    finally:
        app.stop(grace=5)
    assert seen.attempts == {"held": [1]}


def test_push_consumer_cannot_be_its_own_dead_letter_queue(conveyor_client: conveyor.Conveyor) -> None:
    app = conveyor.App(conveyor_client)
    with pytest.raises(conveyor.InvalidRequest, match="its own dead letter queue"):
        app.consumer("q", dead_letter_queue="q")(Deliveries().record)
    assert app.specs == []


def test_handler_retry_delay_out_of_range_is_refused_with_10203(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue
) -> None:
    queue.send_batch([{"body": 1}, {"body": 2}])
    codes: list[int] = []
    seen = Deliveries()

    def handler(batch: conveyor.MessageBatch) -> None:
        seen.record(batch)
        calls: list[Callable[[], None]] = [
            lambda: batch.messages[0].retry(delay_seconds=86_401),
            lambda: batch.retry_all(delay_seconds=-1),
        ]
        for call in calls:
            try:
                call()
            except conveyor.InvalidMessage as error:
                codes.append(error.code)

    consume(conveyor_client, "q", handler, max_batch_size=2)
    assert codes == [10203, 10203]
    # Refused calls decide nothing: the handler returned, so both messages were acked.
    assert seen.redelivered() == set() and queue.counters().acked == 2


def test_push_handler_gets_bodies_decoded_by_content_type(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue
) -> None:
    queue.send_batch(
        [
            {"body": {"j": [1]}},
            {"body": "t", "content_type": "text"},
            {"body": b"\x00b", "content_type": "bytes"},
        ]
    )
    got: list[tuple[object, str]] = []
    consume(conveyor_client, "q", lambda b: got.extend((m.body, m.content_type) for m in b.messages))
    assert sorted(got, key=repr) == sorted([({"j": [1]}, "json"), ("t", "text"), (b"\x00b", "bytes")], key=repr)


def test_consumer_of_a_missing_queue_fails_to_start(conveyor_client: conveyor.Conveyor) -> None:
    app = conveyor.App(conveyor_client)
    app.consumer("missing")(Deliveries().record)
    with pytest.raises(conveyor.QueueNotFound):
        app.start()
    assert conveyor_client.list_queues() == []


def test_purge_during_a_running_batch_makes_its_acks_warnings(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue, caplog: pytest.LogCaptureFixture
) -> None:
    queue.send_batch([{"body": 1}, {"body": 2}])
    started, release = threading.Event(), threading.Event()

    def handler(batch: conveyor.MessageBatch) -> None:
        started.set()
        release.wait(10)

    app = conveyor.App(conveyor_client)
    app.consumer("q", max_batch_size=2, max_batch_timeout=0)(handler)
    with caplog.at_level(logging.WARNING, logger="conveyor.consumer"):
        app.start()
        try:
            assert started.wait(10)
            assert queue.purge() == 2
            release.set()
            wait_for(lambda: app.dispatchers["q"].idle())
        finally:
            app.stop(grace=5)
    assert queue.counters().acked == 0
    assert queue.metrics() == conveyor.Metrics(0, 0, 0)
    assert any("not found" in r.getMessage() for r in caplog.records)
