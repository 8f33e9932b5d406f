"""The message limits of the reference's table: body size, batch count and bytes, delays.

Each refusal has its class, Cloudflare's code, a message naming the limit and the value given, and
leaves the queue as it was.
"""

from __future__ import annotations

from typing import Any

import conveyor
from tests.conformance.support import backlog, bodies, refused


def test_message_of_exactly_128000_encoded_bytes_is_accepted(queue: conveyor.Queue) -> None:
    queue.send("x" * 127_998)  # JSON adds the two quotes
    queue.send(b"\x00" * 128_000, content_type="bytes")
    queue.send("y" * 128_000, content_type="text")
    assert backlog(queue) == (3, 3 * 128_000)


def test_message_over_128000_bytes_is_refused_with_10204(queue: conveyor.Queue) -> None:
    text = refused(queue, conveyor.MessageTooLarge, 10204, lambda: queue.send(b"\x00" * 131_072, content_type="bytes"))
    assert text == "message is 131072 bytes; the limit is 128000 (code 10204)"
    assert conveyor.MessageTooLarge.status == 413


# Tables of refused values are checked in a loop inside one test: a deployment per engine is the
# expensive part of a conformance test, and these refusals need only one.
OVERSIZED: list[tuple[Any, str, int]] = [
    ("x" * 127_999, "json", 128_001),
    ("é" * 64_001, "text", 128_002),  # the limit is on encoded bytes, not characters
    (bytearray(128_001), "bytes", 128_001),
]


def test_message_size_counts_encoded_bytes(queue: conveyor.Queue) -> None:
    for body, content_type, size in OVERSIZED:
        text = refused(queue, conveyor.MessageTooLarge, 10204, queue.send, body, content_type=content_type)
        assert f"message is {size} bytes; the limit is 128000" in text


def test_oversized_message_in_a_batch_refuses_the_whole_batch(queue: conveyor.Queue) -> None:
    batch: list[dict[str, object]] = [{"body": "ok"}, {"body": b"\x00" * 128_001, "content_type": "bytes"}]
    text = refused(queue, conveyor.MessageTooLarge, 10204, lambda: queue.send_batch(batch))
    assert "128001" in text


def test_batch_of_100_messages_is_accepted(queue: conveyor.Queue) -> None:
    metrics = queue.send_batch([{"body": i} for i in range(100)]).metrics
    assert metrics.backlog_count == 100


def test_batch_of_101_messages_is_refused_with_10206(queue: conveyor.Queue) -> None:
    batch = [{"body": i} for i in range(101)]
    text = refused(queue, conveyor.TooManyMessages, 10206, lambda: queue.send_batch(batch))
    assert "batch has 101 messages; the limit is 100" in text


def test_batch_of_exactly_256000_bytes_is_accepted(queue: conveyor.Queue) -> None:
    batch = [{"body": b"\x00" * 128_000, "content_type": "bytes"}] * 2
    assert queue.send_batch(batch).metrics.backlog_bytes == 256_000


def test_batch_over_256000_bytes_is_refused_with_10205(queue: conveyor.Queue) -> None:
    batch = [{"body": b"\x00" * 100_000, "content_type": "bytes"}] * 3
    text = refused(queue, conveyor.BatchTooLarge, 10205, lambda: queue.send_batch(batch))
    assert "batch is 300000 bytes; the limit is 256000" in text
    assert conveyor.BatchTooLarge.status == 413


def test_delays_from_0_to_86400_seconds_are_accepted(queue: conveyor.Queue) -> None:
    for delay in [0, 86_400]:
        queue.send("a", delay_seconds=delay)
        queue.send_batch([{"body": "b"}], delay_seconds=delay)
        queue.send_batch([{"body": "c", "delay_seconds": delay}])
    assert backlog(queue)[0] == 6


def test_message_delay_out_of_range_is_refused_with_10203(queue: conveyor.Queue) -> None:
    delay: Any
    for delay in [-1, 86_401, 1.5, "10", True]:
        text = refused(queue, conveyor.InvalidMessage, 10203, queue.send, "a", delay_seconds=delay)
        assert f"delay_seconds is {delay!r}" in text and "86400" in text


def test_batch_delay_out_of_range_is_refused_with_10202(queue: conveyor.Queue) -> None:
    for delay in [-1, 86_401]:
        text = refused(queue, conveyor.InvalidBatchDelay, 10202, queue.send_batch, [{"body": 1}], delay_seconds=delay)
        assert f"delay_seconds is {delay}" in text and "86400" in text


def test_delay_of_one_message_in_a_batch_out_of_range_is_refused_with_10203(queue: conveyor.Queue) -> None:
    batch = [{"body": 1}, {"body": 2, "delay_seconds": 86_401}]
    text = refused(queue, conveyor.InvalidMessage, 10203, lambda: queue.send_batch(batch))
    assert "delay_seconds is 86401" in text


def test_retry_delay_of_a_pull_ack_out_of_range_is_refused_with_10203(pull_queue: conveyor.Queue) -> None:
    pull_queue.send("a")
    [m] = pull_queue.pull()
    text = refused(pull_queue, conveyor.InvalidMessage, 10203, lambda: pull_queue.ack(retries=[(m.lease_id, 86_401)]))
    assert "86401" in text
    # The lease is untouched: the message can still be acked.
    assert pull_queue.ack(acks=[m.lease_id]).ack_count == 1
    assert bodies(pull_queue) == []


def test_per_queue_throughput_refusal_is_10250_with_http_429() -> None:
    # Cloudflare's 5,000 msg/s per queue is a property of its service; Conveyor's refusal, when a
    # transport sheds load, carries the same code and status.
    error = conveyor.Overloaded("queue q is over its write rate of 5000 messages/s")
    assert (error.code, error.status) == (10250, 429)
