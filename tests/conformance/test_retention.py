"""Retention: messages older than the queue's ``message_retention_period`` are deleted by the
engine's ``expire()`` (the coordinator's retention service), whatever state they are in."""

from __future__ import annotations

import conveyor
from tests.conformance.support import FakeClock, backlog, bodies


def test_message_expires_once_older_than_the_retention_period(
    conveyor_client: conveyor.Conveyor, clock: FakeClock
) -> None:
    q = conveyor_client.create_queue("q", message_retention_period=60)
    q.send("old")
    clock.advance(30)
    q.send("young")
    clock.advance(30)
    assert conveyor_client.engine.expire() == {}
    clock.advance(0.001)
    assert conveyor_client.engine.expire() == {q.id: 1}
    assert bodies(q) == ["young"]
    assert backlog(q) == (1, 7)
    assert q.counters().expired == 1
    assert q.metrics().oldest_message_timestamp_ms == clock.now_ms() - 30_001


def test_each_queue_keeps_its_own_retention(conveyor_client: conveyor.Conveyor, clock: FakeClock) -> None:
    short = conveyor_client.create_queue("short", message_retention_period=60)
    long = conveyor_client.create_queue("long", message_retention_period=120)
    short.send(1)
    long.send(2)
    clock.advance(90)
    assert conveyor_client.engine.expire() == {short.id: 1}
    assert (backlog(short)[0], backlog(long)[0]) == (0, 1)


def test_shortened_retention_applies_to_stored_messages(conveyor_client: conveyor.Conveyor, clock: FakeClock) -> None:
    q = conveyor_client.create_queue("q")
    q.send("m")
    clock.advance(100)
    assert conveyor_client.engine.expire() == {}
    q.update(message_retention_period=60)
    assert conveyor_client.engine.expire() == {q.id: 1}


def test_leased_and_delayed_messages_expire_too(
    conveyor_client: conveyor.Conveyor, pull_queue: conveyor.Queue, clock: FakeClock
) -> None:
    pull_queue.update(message_retention_period=60)
    pull_queue.send("leased")
    pull_queue.send("delayed", delay_seconds=3_600)
    [m] = pull_queue.pull(visibility_timeout_ms=3_600_000)
    clock.advance(61)
    conveyor_client.engine.expire()
    assert backlog(pull_queue) == (0, 0)
    result = pull_queue.ack(acks=[m.lease_id])
    assert result.ack_count == 0 and m.lease_id in result.warnings


def test_expiry_never_takes_a_message_early_when_the_clock_stepped_back(
    conveyor_client: conveyor.Conveyor, clock: FakeClock
) -> None:
    """Expiry walks a shard in storage order up to the first message still within retention (no
    index on send times to pay for on every send): one stored after it but stamped earlier waits
    for it, and nothing goes before its own time."""
    q = conveyor_client.create_queue("q", message_retention_period=60)
    q.send("ahead")
    clock.advance(-10)
    q.send("behind")  # stamped 10 s before the message stored ahead of it
    clock.advance(65)  # "behind" is 65 s old, "ahead" 55 s
    conveyor_client.engine.expire()
    assert "ahead" in bodies(q)
    clock.advance(5.001)
    conveyor_client.engine.expire()
    assert bodies(q) == []
    assert q.counters().expired == 2
