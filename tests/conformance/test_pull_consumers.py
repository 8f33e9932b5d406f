"""Pull (``http_pull``) consumers: leased batches, visibility timeouts, acks and retries."""

from __future__ import annotations

import threading

import pytest

import conveyor
from conveyor import limits
from tests.conformance.support import FakeClock, backlog, bodies, release_schedule


def handler(batch: conveyor.MessageBatch) -> None:
    """A push handler, only registered here."""


def test_pull_needs_a_pull_consumer(queue: conveyor.Queue) -> None:
    queue.send("a")
    with pytest.raises(conveyor.InvalidRequest, match="no http_pull consumer"):
        queue.pull()
    assert queue.counters().in_flight == 0


def test_pull_on_an_empty_queue_returns_no_messages(pull_queue: conveyor.Queue) -> None:
    assert pull_queue.pull() == []


def test_pulled_message_carries_id_attempts_lease_and_send_time(pull_queue: conveyor.Queue, clock: FakeClock) -> None:
    sent_at = clock.now_ms()
    pull_queue.send({"k": "v"})
    clock.advance(2)
    [m] = pull_queue.pull()
    assert limits.ID_PATTERN.match(m.id)
    assert (m.body, m.attempts, m.timestamp_ms, m.content_type) == ({"k": "v"}, 1, sent_at, "json")
    assert m.lease_id


def test_pull_uses_the_consumer_batch_size_by_default(pull_queue: conveyor.Queue) -> None:
    pull_queue.send_batch([{"body": i} for i in range(8)])
    assert len(pull_queue.pull()) == 5


def test_pulls_return_disjoint_leased_batches(pull_queue: conveyor.Queue) -> None:
    pull_queue.send_batch([{"body": i} for i in range(10)])
    batches = [pull_queue.pull(batch_size=4) for _ in range(4)]
    assert [len(b) for b in batches] == [4, 4, 2, 0]
    ids = [m.id for b in batches for m in b]
    assert len(set(ids)) == 10
    assert sorted(m.body for b in batches for m in b) == list(range(10))
    assert pull_queue.counters().in_flight == 10
    assert backlog(pull_queue)[0] == 10


def test_ack_deletes_the_message(pull_queue: conveyor.Queue) -> None:
    pull_queue.send_batch([{"body": "a"}, {"body": "b"}])
    pulled = pull_queue.pull()
    result = pull_queue.ack(acks=[m.lease_id for m in pulled])
    assert result == conveyor.AckResult(ack_count=2, retry_count=0, warnings={})
    assert backlog(pull_queue) == (0, 0)
    assert pull_queue.counters().acked == 2


def test_unacked_message_is_delivered_again_after_its_visibility_timeout(
    pull_queue: conveyor.Queue, clock: FakeClock
) -> None:
    pull_queue.send("a")
    [first] = pull_queue.pull(visibility_timeout_ms=10_000)
    clock.advance(9.999)
    assert pull_queue.pull() == []
    clock.advance(0.001)
    [again] = pull_queue.pull()
    assert (again.id, again.attempts) == (first.id, 2)
    assert again.lease_id != first.lease_id


def test_consumer_visibility_timeout_is_the_default_lease(queue: conveyor.Queue, clock: FakeClock) -> None:
    queue.add_pull_consumer(visibility_timeout_ms=1_500)
    queue.send("a")
    assert len(queue.pull()) == 1
    clock.advance(1.499)
    assert queue.pull() == []
    clock.advance(0.001)
    assert [m.attempts for m in queue.pull()] == [2]


def test_retry_with_a_delay_delivers_again_after_the_delay(pull_queue: conveyor.Queue, clock: FakeClock) -> None:
    pull_queue.send_batch([{"body": "later"}, {"body": "now"}, {"body": "done"}])
    by_body = {m.body: m for m in pull_queue.pull()}
    result = pull_queue.ack(
        acks=[by_body["done"].lease_id],
        retries=[(by_body["later"].lease_id, 60), (by_body["now"].lease_id, 0)],
    )
    assert (result.ack_count, result.retry_count, result.warnings) == (1, 2, {})
    assert release_schedule(pull_queue, clock, [0, 60]) == {"now": 0, "later": 60}
    assert pull_queue.counters().retried == 2


def test_retry_without_a_delay_takes_the_consumer_retry_delay(queue: conveyor.Queue, clock: FakeClock) -> None:
    queue.add_pull_consumer(retry_delay=45)
    queue.send_batch([{"body": "default"}, {"body": "explicit"}])
    by_body = {m.body: m for m in queue.pull()}
    queue.ack(retries=[by_body["default"].lease_id, (by_body["explicit"].lease_id, None)])
    assert release_schedule(queue, clock, [0, 45]) == {"default": 45, "explicit": 45}


def test_retried_message_counts_its_attempts(pull_queue: conveyor.Queue) -> None:
    pull_queue.send("a")
    attempts = []
    for _ in range(3):
        [m] = pull_queue.pull()
        attempts.append(m.attempts)
        pull_queue.ack(retries=[(m.lease_id, 0)])
    assert attempts == [1, 2, 3]


def test_retries_past_max_retries_go_to_the_dead_letter_queue(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue, clock: FakeClock
) -> None:
    queue.add_pull_consumer(max_retries=1, dead_letter_queue="q-dlq")
    sent_at = clock.now_ms()
    queue.send("poison")
    clock.advance(1)
    [first] = queue.pull()
    queue.ack(retries=[(first.lease_id, 0)])
    [second] = queue.pull()
    assert second.attempts == 2
    assert queue.ack(retries=[(second.lease_id, 0)]).retry_count == 1
    assert backlog(queue) == (0, 0)
    assert queue.counters().dead_lettered == 1
    dlq = conveyor_client.queue("q-dlq")  # created on first use
    dlq.add_pull_consumer()
    [dead] = dlq.pull()
    assert (dead.id, dead.timestamp_ms, dead.body, dead.attempts) == (first.id, sent_at, "poison", 1)


def test_retries_past_max_retries_without_a_dead_letter_queue_drop_and_count(queue: conveyor.Queue) -> None:
    queue.add_pull_consumer(max_retries=0)
    queue.send("poison")
    [m] = queue.pull()
    assert queue.ack(retries=[(m.lease_id, 0)]).retry_count == 1
    assert backlog(queue) == (0, 0)
    assert queue.counters().dropped == 1
    assert queue.pull() == []


def test_lease_running_out_on_the_last_delivery_dead_letters_the_message(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue, clock: FakeClock
) -> None:
    queue.add_pull_consumer(max_retries=0, dead_letter_queue="q-dlq", visibility_timeout_ms=1_000)
    queue.send("slow")
    [m] = queue.pull()
    clock.advance(1)
    assert queue.pull() == []
    assert backlog(queue) == (0, 0)
    assert [d.id for d in conveyor_client.queue("q-dlq").peek()] == [m.id]


def test_pull_on_a_paused_queue_raises_delivery_paused(pull_queue: conveyor.Queue) -> None:
    pull_queue.pause_delivery()
    pull_queue.send("kept")  # sends are still accepted
    with pytest.raises(conveyor.DeliveryPaused) as excinfo:
        pull_queue.pull()
    assert (excinfo.value.code, excinfo.value.status) == (409, 409)
    assert "queue_delivery_paused" in str(excinfo.value)
    assert pull_queue.counters().in_flight == 0
    pull_queue.resume_delivery()
    assert [m.body for m in pull_queue.pull()] == ["kept"]


def test_pause_through_another_handle_stops_pulls(
    conveyor_client: conveyor.Conveyor, pull_queue: conveyor.Queue
) -> None:
    pull_queue.send("a")
    conveyor_client.queue("q").pause_delivery()
    with pytest.raises(conveyor.DeliveryPaused):
        pull_queue.pull()
    assert bodies(pull_queue) == ["a"]


def test_push_consumer_queue_refuses_pulls(conveyor_client: conveyor.Conveyor, queue: conveyor.Queue) -> None:
    app = conveyor.App(conveyor_client)
    app.consumer("q", max_batch_timeout=0)(handler)
    app.start()
    app.stop(grace=1)
    queue.send("a")
    with pytest.raises(conveyor.InvalidRequest, match="no http_pull consumer"):
        queue.pull()


def test_dead_letter_keeps_body_and_content_type(conveyor_client: conveyor.Conveyor, queue: conveyor.Queue) -> None:
    queue.add_pull_consumer(max_retries=0, dead_letter_queue="q-dlq")
    queue.send_batch([{"body": b"\x01\x02", "content_type": "bytes"}, {"body": "é", "content_type": "text"}])
    queue.ack(retries=[(m.lease_id, 0) for m in queue.pull()])
    dead = conveyor_client.queue("q-dlq").peek()
    assert sorted((m.body, m.content_type) for m in dead if m.content_type == "bytes") == [(b"\x01\x02", "bytes")]
    assert [(m.body, m.content_type) for m in dead if m.content_type == "text"] == [("é", "text")]


def test_concurrent_pullers_on_two_connections_get_disjoint_messages(
    conveyor_client: conveyor.Conveyor, second_client: conveyor.Conveyor, pull_queue: conveyor.Queue
) -> None:
    for start in range(0, 200, 100):
        pull_queue.send_batch([{"body": n} for n in range(start, start + 100)])
    pulled: list[int] = []
    lock = threading.Lock()

    def puller(q: conveyor.Queue) -> None:
        while batch := q.pull(batch_size=7):
            with lock:
                pulled.extend(m.body for m in batch)
            q.ack(acks=[m.lease_id for m in batch])

    handles = [pull_queue, second_client.queue("q")] * 2
    threads = [threading.Thread(target=puller, args=(q,)) for q in handles]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(pulled) == list(range(200))
    assert backlog(pull_queue) == (0, 0)
    assert pull_queue.counters().acked == 200
