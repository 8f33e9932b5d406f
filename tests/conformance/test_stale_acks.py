"""Stale acks are safe (DESIGN.md improvement 2): a lease id names one delivery; settling a
superseded delivery changes nothing and warns, settling an expired one that nobody re-leased works."""

from __future__ import annotations

import conveyor
from conveyor.model import DeliveryPolicy
from tests.conformance.support import FakeClock, backlog


def redelivered(q: conveyor.Queue, clock: FakeClock) -> tuple[conveyor.PulledMessage, conveyor.PulledMessage]:
    """Send one message, let its first lease run out, lease it again: (stale, current)."""
    q.send("m")
    [stale] = q.pull(visibility_timeout_ms=1_000)
    clock.advance(1)
    [current] = q.pull(visibility_timeout_ms=60_000)
    assert current.id == stale.id and current.attempts == 2
    return stale, current


def test_ack_of_a_superseded_lease_does_not_delete_and_warns(pull_queue: conveyor.Queue, clock: FakeClock) -> None:
    stale, current = redelivered(pull_queue, clock)
    result = pull_queue.ack(acks=[stale.lease_id])
    assert (result.ack_count, result.retry_count) == (0, 0)
    assert list(result.warnings) == [stale.lease_id]
    assert "superseded" in result.warnings[stale.lease_id]
    assert backlog(pull_queue) == (1, 3)
    assert pull_queue.counters().in_flight == 1
    assert pull_queue.ack(acks=[current.lease_id]) == conveyor.AckResult(1, 0, {})


def test_retry_of_a_superseded_lease_changes_nothing_and_warns(pull_queue: conveyor.Queue, clock: FakeClock) -> None:
    stale, _ = redelivered(pull_queue, clock)
    result = pull_queue.ack(retries=[(stale.lease_id, 0)])
    assert (result.ack_count, result.retry_count) == (0, 0)
    assert stale.lease_id in result.warnings
    # The current delivery still holds the message: nothing to pull.
    assert pull_queue.pull() == []
    assert pull_queue.counters().retried == 0


def test_ack_after_lease_expiry_without_a_newer_delivery_is_accepted(
    pull_queue: conveyor.Queue, clock: FakeClock
) -> None:
    pull_queue.send("m")
    [m] = pull_queue.pull(visibility_timeout_ms=1_000)
    clock.advance(30)
    assert pull_queue.ack(acks=[m.lease_id]) == conveyor.AckResult(1, 0, {})
    assert backlog(pull_queue) == (0, 0)
    assert pull_queue.pull() == []


def test_retry_after_lease_expiry_without_a_newer_delivery_is_accepted(
    pull_queue: conveyor.Queue, clock: FakeClock
) -> None:
    pull_queue.send("m")
    [m] = pull_queue.pull(visibility_timeout_ms=1_000)
    clock.advance(30)
    assert pull_queue.ack(retries=[(m.lease_id, 0)]) == conveyor.AckResult(0, 1, {})
    assert [again.attempts for again in pull_queue.pull()] == [2]


def test_second_ack_of_the_same_lease_warns(pull_queue: conveyor.Queue) -> None:
    pull_queue.send_batch([{"body": 1}, {"body": 2}])
    first, second = pull_queue.pull()
    pull_queue.ack(acks=[first.lease_id])
    result = pull_queue.ack(acks=[first.lease_id, second.lease_id])
    assert result.ack_count == 1
    assert list(result.warnings) == [first.lease_id]
    assert "not found" in result.warnings[first.lease_id]


def test_unknown_and_malformed_lease_ids_warn_and_change_nothing(pull_queue: conveyor.Queue) -> None:
    pull_queue.send("m")
    [m] = pull_queue.pull()
    bogus = ["not-a-lease", "", "zz", "0-ffffff-1"]
    result = pull_queue.ack(acks=bogus, retries=[("nope", 1)])
    assert (result.ack_count, result.retry_count) == (0, 0)
    assert set(result.warnings) == {*bogus, "nope"}
    assert backlog(pull_queue) == (1, 3)
    assert pull_queue.ack(acks=[m.lease_id]).ack_count == 1


def test_ack_of_a_lease_from_another_queue_changes_nothing(
    conveyor_client: conveyor.Conveyor, pull_queue: conveyor.Queue
) -> None:
    other = conveyor_client.create_queue("other")
    other.add_pull_consumer()
    other.send("theirs")
    pull_queue.send("ours")
    [theirs] = other.pull()
    result = pull_queue.ack(acks=[theirs.lease_id])
    assert result.ack_count == 0 and theirs.lease_id in result.warnings
    assert backlog(other) == (1, 8)
    assert backlog(pull_queue) == (1, 6)


def test_a_settle_that_does_not_wait_for_its_flush_acks_and_retries_alike(
    conveyor_client: conveyor.Conveyor, pull_queue: conveyor.Queue
) -> None:
    # What a workflow's internal queue uses (its runs' acks): the same outcome, warnings included.
    pull_queue.send_batch([{"body": "acked"}, {"body": "retried"}])
    acked, retried = sorted(pull_queue.pull(batch_size=2), key=lambda m: str(m.body))
    policy = DeliveryPolicy(max_retries=3)
    engine = conveyor_client.engine
    result = engine.settle(pull_queue.id, [acked.lease_id], [(retried.lease_id, 0)], policy, durable=False)
    assert (result.acked, result.retried, result.warnings) == (1, 1, {})
    assert [m.body for m in pull_queue.pull()] == ["retried"]
    again = engine.settle(pull_queue.id, [acked.lease_id], [], policy, durable=False)
    assert (again.acked, list(again.warnings)) == (0, [acked.lease_id])
