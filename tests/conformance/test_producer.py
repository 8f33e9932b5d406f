"""Producer semantics: content types, bad input, durability, returned metrics, delay precedence."""

from __future__ import annotations

from typing import Any

import conveyor
from tests.conformance.support import FakeClock, bodies, refused, release_schedule

ROUND_TRIPS: list[tuple[Any, str]] = [
    ({"to": "a@b", "n": [1, 2.5, None, True]}, "json"),
    ("héllo", "text"),
    (b"\x00\xff\x10", "bytes"),
    ("plain string as JSON", "json"),
]


def test_each_content_type_round_trips(pull_queue: conveyor.Queue) -> None:
    for body, content_type in ROUND_TRIPS:
        pull_queue.send(body, content_type=content_type)
        [peeked] = pull_queue.peek()
        assert (peeked.body, peeked.content_type) == (body, content_type)
        [m] = pull_queue.pull()
        assert (m.body, m.content_type) == (body, content_type)
        pull_queue.ack(acks=[m.lease_id])


def test_json_is_the_default_content_type(pull_queue: conveyor.Queue) -> None:
    pull_queue.send([1, 2])
    pull_queue.send_batch([{"body": {"a": 1}}])
    assert sorted(m.content_type for m in pull_queue.pull()) == ["json", "json"]


def test_bytearray_and_memoryview_are_stored_as_bytes(pull_queue: conveyor.Queue) -> None:
    pull_queue.send(bytearray(b"ab"), content_type="bytes")
    pull_queue.send(memoryview(b"cd"), content_type="bytes")
    assert sorted(m.body for m in pull_queue.pull()) == [b"ab", b"cd"]


def test_v8_content_type_is_refused_clearly(queue: conveyor.Queue) -> None:
    text = refused(queue, conveyor.InvalidMessage, 10203, lambda: queue.send("x", content_type="v8"))
    assert "'v8'" in text and "not supported" in text


def test_unknown_content_type_is_refused(queue: conveyor.Queue) -> None:
    text = refused(queue, conveyor.InvalidMessage, 10203, lambda: queue.send("x", content_type="pickle"))
    assert "unknown content type 'pickle'" in text


UNFIT_BODIES: list[tuple[Any, str, str]] = [
    (b"raw", "text", "needs a str body, got bytes"),
    (42, "text", "needs a str body, got int"),
    ("str", "bytes", "needs a bytes-like body, got str"),
    ({1, 2}, "json", "not JSON-serialisable"),
    (float("nan"), "json", "not JSON-serialisable"),
]


def test_body_the_content_type_cannot_hold_is_refused(queue: conveyor.Queue) -> None:
    for body, content_type, says in UNFIT_BODIES:
        text = refused(queue, conveyor.InvalidMessage, 10203, queue.send, body, content_type=content_type)
        assert says in text


def test_bad_message_in_a_batch_refuses_the_whole_batch(queue: conveyor.Queue) -> None:
    batch: list[dict[str, object]] = [{"body": "ok", "content_type": "text"}, {"body": 5, "content_type": "text"}]
    refused(queue, conveyor.InvalidMessage, 10203, lambda: queue.send_batch(batch))


def test_empty_batch_is_refused(queue: conveyor.Queue) -> None:
    text = refused(queue, conveyor.InvalidRequest, 10207, lambda: queue.send_batch([]))
    assert "at least one message" in text


def test_batch_message_without_a_body_is_refused(queue: conveyor.Queue) -> None:
    text = refused(
        queue, conveyor.InvalidMessage, 10203, lambda: queue.send_batch([{"body": 1}, {"content_type": "json"}])
    )
    assert "message 1 of the batch has no body" in text


def test_batch_that_is_not_a_list_is_refused(queue: conveyor.Queue) -> None:
    refused(queue, conveyor.InvalidRequest, 10207, lambda: queue.send_batch("not a list"))  # type: ignore[arg-type]


def test_send_returns_the_queue_metrics(queue: conveyor.Queue, clock: FakeClock) -> None:
    first = clock.now_ms()
    assert queue.send("ab", content_type="text").metrics == conveyor.Metrics(1, 2, first)
    clock.advance(5)
    sent = queue.send_batch([{"body": b"xyz", "content_type": "bytes"}, {"body": 7}])
    assert sent.metrics == conveyor.Metrics(3, 6, first)
    assert queue.metrics() == conveyor.Metrics(3, 6, first)


def test_send_returns_the_id_its_consumer_sees(pull_queue: conveyor.Queue) -> None:
    sent = pull_queue.send({"to": "a@b"})
    assert len(sent.id) == 32 and sent.metrics.backlog_count == 1
    [m] = pull_queue.pull()
    assert m.id == sent.id


def test_send_batch_returns_every_id_in_the_order_given(pull_queue: conveyor.Queue) -> None:
    sent = pull_queue.send_batch([{"body": n} for n in range(10)])
    assert len(set(sent.ids)) == 10
    by_id = {m.id: m.body for m in pull_queue.pull(batch_size=10)}
    assert [by_id[i] for i in sent.ids] == list(range(10))


def test_batch_message_with_an_unknown_field_is_refused_naming_it(queue: conveyor.Queue) -> None:
    # A misspelt delay must not be ignored: the message would be delivered at once.
    batch: list[dict[str, object]] = [{"body": 1}, {"body": 2, "delaySeconds": 3600}]
    text = refused(queue, conveyor.InvalidMessage, 10203, lambda: queue.send_batch(batch))
    assert "message 1 of the batch has unknown field 'delaySeconds'" in text
    assert queue.metrics().backlog_count == 0


def test_fractional_delay_is_10203(queue: conveyor.Queue) -> None:
    refused(queue, conveyor.InvalidMessage, 10203, lambda: queue.send(1, delay_seconds=1.5))  # type: ignore[arg-type]
    refused(queue, conveyor.InvalidMessage, 10203, lambda: queue.send_batch([{"body": 1, "delay_seconds": 0.5}]))
    refused(queue, conveyor.InvalidBatchDelay, 10202, lambda: queue.send_batch([{"body": 1}], delay_seconds=2.5))  # type: ignore[arg-type]


def test_empty_queue_metrics_are_zero(queue: conveyor.Queue) -> None:
    assert queue.metrics() == conveyor.Metrics(0, 0, 0)


def test_sent_messages_survive_closing_the_connection(
    conveyor_client: conveyor.Conveyor, second_client: conveyor.Conveyor
) -> None:
    q = conveyor_client.create_queue("q")
    q.send({"n": 1})
    q.send_batch([{"body": {"n": 2}}, {"body": {"n": 3}}])
    conveyor_client.close()
    assert sorted(m.body["n"] for m in second_client.queue("q").peek()) == [1, 2, 3]


def test_delay_precedence_message_then_batch_then_queue_then_zero(
    conveyor_client: conveyor.Conveyor, clock: FakeClock
) -> None:
    q = conveyor_client.create_queue("q", delivery_delay=30)
    q.add_pull_consumer()
    q.send_batch(
        [{"body": "message", "delay_seconds": 10}, {"body": "batch"}, {"body": "explicit-zero", "delay_seconds": 0}],
        delay_seconds=20,
    )
    q.send_batch([{"body": "queue-batch"}])
    q.send("queue")
    q.send("send-zero", delay_seconds=0)
    q.send("send-five", delay_seconds=5)
    assert release_schedule(q, clock, [0, 5, 10, 20, 30]) == {
        "message": 10,
        "batch": 20,
        "explicit-zero": 0,
        "queue-batch": 30,
        "queue": 30,
        "send-zero": 0,
        "send-five": 5,
    }


def test_batch_delay_of_zero_overrides_the_queue_delay(conveyor_client: conveyor.Conveyor, clock: FakeClock) -> None:
    q = conveyor_client.create_queue("q", delivery_delay=30)
    q.add_pull_consumer()
    q.send_batch([{"body": "a"}, {"body": "b", "delay_seconds": 7}], delay_seconds=0)
    assert release_schedule(q, clock, [0, 7]) == {"a": 0, "b": 7}


def test_without_any_delay_messages_are_deliverable_at_once(pull_queue: conveyor.Queue, clock: FakeClock) -> None:
    pull_queue.send("now")
    assert [m.body for m in pull_queue.pull()] == ["now"]


def test_queue_delivery_delay_update_applies_to_later_sends(pull_queue: conveyor.Queue, clock: FakeClock) -> None:
    pull_queue.send("before")
    pull_queue.update(delivery_delay=15)
    pull_queue.send("after")
    assert release_schedule(pull_queue, clock, [0, 15]) == {"before": 0, "after": 15}


def test_delayed_messages_count_in_the_backlog(queue: conveyor.Queue, clock: FakeClock) -> None:
    queue.send("later", content_type="text", delay_seconds=3600)
    assert queue.metrics() == conveyor.Metrics(1, 5, clock.now_ms())
    assert bodies(queue) == ["later"]


def test_send_applies_the_queue_delay_as_it_is_now_not_as_the_handle_saw_it(
    conveyor_client: conveyor.Conveyor, second_client: conveyor.Conveyor, clock: FakeClock
) -> None:
    q = conveyor_client.create_queue("q")
    q.add_pull_consumer()
    q.send("before")
    second_client.queue("q").update(delivery_delay=15)  # another process changes the setting
    q.send("after")
    q.send_batch([{"body": "after-batch"}])
    assert release_schedule(q, clock, [0, 15]) == {"before": 0, "after": 15, "after-batch": 15}
