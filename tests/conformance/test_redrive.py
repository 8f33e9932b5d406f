"""Redrive from a dead letter queue (DESIGN.md improvement 1)."""

from __future__ import annotations

import pytest

import conveyor
from conveyor import tracing
from tests.conformance.support import FakeClock, backlog


def dead_letter(q: conveyor.Queue, bodies: list[str]) -> list[conveyor.PulledMessage]:
    """Send ``bodies`` to ``q`` (a pull consumer with max_retries=0 and DLQ ``q-dlq``) and fail each
    once, so that all of them land in the dead letter queue. Returns their first deliveries."""
    q.send_batch([{"body": b} for b in bodies])
    pulled = q.pull(batch_size=100)
    q.ack(retries=[(m.lease_id, 0) for m in pulled])
    return pulled


def test_redrive_moves_dead_letters_back_and_returns_the_count(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue, clock: FakeClock
) -> None:
    queue.add_pull_consumer(max_retries=0, dead_letter_queue="q-dlq")
    sent_at = clock.now_ms()
    first = dead_letter(queue, ["a", "b", "c"])
    dlq = conveyor_client.queue("q-dlq")
    assert backlog(dlq) == (3, 9) and backlog(queue) == (0, 0)
    assert dlq.redrive(to="q") == 3
    assert dlq.metrics() == conveyor.Metrics(0, 0, 0)
    again = queue.pull(batch_size=100)
    assert sorted((m.id, m.body) for m in again) == sorted((m.id, m.body) for m in first)
    assert {m.attempts for m in again} == {1}
    assert {m.timestamp_ms for m in again} == {sent_at}


def test_redrive_of_an_empty_queue_moves_nothing(conveyor_client: conveyor.Conveyor, queue: conveyor.Queue) -> None:
    conveyor_client.create_queue("q-dlq")
    queue.send("stays")
    assert conveyor_client.queue("q-dlq").redrive(to="q") == 0
    assert backlog(queue) == (1, 7)


def test_redrive_to_a_missing_queue_is_refused_and_moves_nothing(conveyor_client: conveyor.Conveyor) -> None:
    dlq = conveyor_client.create_queue("q-dlq")
    dlq.send("dead")
    with pytest.raises(conveyor.QueueNotFound):
        dlq.redrive(to="missing")
    assert backlog(dlq) == (1, 6)


def test_redrive_moves_large_backlogs_completely(conveyor_client: conveyor.Conveyor, queue: conveyor.Queue) -> None:
    dlq = conveyor_client.create_queue("q-dlq")
    for start in range(0, 1_200, 100):
        dlq.send_batch([{"body": n} for n in range(start, start + 100)])
    assert dlq.redrive(to="q") == 1_200
    assert backlog(dlq) == (0, 0)
    assert backlog(queue)[0] == 1_200


def test_redrive_into_the_same_queue_is_refused_and_moves_nothing(conveyor_client: conveyor.Conveyor) -> None:
    dlq = conveyor_client.create_queue("q-dlq")
    dlq.send("dead")
    with pytest.raises(conveyor.InvalidRequest, match="into itself"):
        dlq.redrive(to="q-dlq")
    assert backlog(dlq) == (1, 6)


def test_oldest_message_timestamp_after_a_redrive_is_the_redriven_message(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue, clock: FakeClock
) -> None:
    queue.add_pull_consumer(max_retries=0, dead_letter_queue="q-dlq")
    sent_at = clock.now_ms()
    dead_letter(queue, ["old"])
    clock.advance(10)
    queue.send("new")
    assert conveyor_client.queue("q-dlq").redrive(to="q") == 1
    assert queue.metrics().oldest_message_timestamp_ms == sent_at


def test_engine_refuses_a_redrive_into_the_same_queue(conveyor_client: conveyor.Conveyor) -> None:
    # Below the client's check: the HTTP server passes ids from the wire straight to the engine.
    dlq = conveyor_client.create_queue("q-dlq")
    dlq.send("dead")
    with pytest.raises(conveyor.InvalidRequest, match="into itself"):
        conveyor_client.engine.redrive(dlq.id, dlq.id)
    assert backlog(dlq) == (1, 6)


def test_a_message_keeps_its_traceparent_through_dead_lettering_and_redrive(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue
) -> None:
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    queue.add_pull_consumer(max_retries=0, dead_letter_queue="q-dlq")
    with tracing.use(traceparent):
        dead_letter(queue, ["traced"])
    queue.send("plain")
    dlq = conveyor_client.queue("q-dlq")
    assert [(m.body, m.traceparent) for m in dlq.peek()] == [("traced", traceparent)]
    assert dlq.redrive(to="q") == 1
    assert sorted((m.body, m.traceparent or "") for m in queue.pull(batch_size=10)) == [
        ("plain", ""),
        ("traced", traceparent),
    ]
