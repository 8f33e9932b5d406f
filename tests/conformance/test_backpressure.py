"""Back-pressure as Cloudflare's, on every engine and over HTTP: a queue over its send rate refuses a
send whole with 10250 (``Overloaded``), over its backlog or storage limit with 10251
(``StorageLimitExceeded``), each with ``retry_after`` and nothing stored; without limits (the
default) nothing is refused."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import conveyor
from conveyor.client.limited_engine import LimitedEngine
from conveyor.server.testing import http_client
from tests.conformance.support import backlog, bodies
from tests.engine.postgres.support import fresh_client as postgres_client


def _limited(engine_name: str, tmp: Path, limits: conveyor.QueueLimits) -> conveyor.Conveyor:
    """A fresh deployment on ``engine_name`` whose sends pass ``limits`` (over HTTP: the server's)."""
    if engine_name == "sqlite":
        return conveyor.connect(f"sqlite://{tmp / 'data'}", queue_limits=limits)
    if engine_name == "http":
        return http_client(tmp / "data", queue_limits=limits)
    assert engine_name == "postgres"
    plain = postgres_client(tmp)
    return conveyor.Conveyor(LimitedEngine(plain.engine, limits), plain.url)


@pytest.fixture
def limited(engine_name: str, tmp_path: Path) -> Iterator[Callable[..., conveyor.Conveyor]]:
    opened: list[conveyor.Conveyor] = []

    def open_with(**limits: float) -> conveyor.Conveyor:
        opened.append(_limited(engine_name, tmp_path, conveyor.QueueLimits(**limits)))  # type: ignore[arg-type]
        return opened[-1]

    yield open_with
    for client in opened:
        client.close()


def _refused(q: conveyor.Queue, error: type[conveyor.ConveyorError], action: Callable[[], object]) -> float:
    """``action`` raises exactly ``error`` and stores nothing; returns its ``retry_after``."""
    before = backlog(q), bodies(q)
    with pytest.raises(error) as caught:
        action()
    assert type(caught.value) is error
    assert caught.value.status == 429
    assert (backlog(q), bodies(q)) == before
    assert caught.value.retry_after is not None and caught.value.retry_after > 0
    return caught.value.retry_after


def _until_taken(action: Callable[[], object], seconds: float) -> None:
    """Retry ``action`` while it is refused with a 429, for up to ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            action()
            return
        except (conveyor.Overloaded, conveyor.StorageLimitExceeded) as exc:
            assert time.monotonic() < deadline, exc
            time.sleep(min(0.05, exc.retry_after or 0.05))


def test_a_queue_over_its_send_rate_refuses_a_send_whole_with_10250_until_the_bucket_refills(
    limited: Callable[..., conveyor.Conveyor],
) -> None:
    q = limited(max_send_rate=10).create_queue("q")
    # A batch larger than the bucket (one second: 10) goes when it is full, and leaves it in debt.
    q.send_batch([{"body": n} for n in range(20)])
    retry_after = _refused(q, conveyor.Overloaded, lambda: q.send("one more"))
    assert retry_after <= 2
    with pytest.raises(conveyor.Overloaded, match=r"queue 'q' is over its send rate of 10 messages a second"):
        q.send_batch([{"body": "a"}, {"body": "b"}])
    assert backlog(q)[0] == 20
    _until_taken(lambda: q.send("later"), seconds=10)
    assert backlog(q)[0] == 21


def test_the_send_rate_counts_messages_so_a_full_batch_takes_a_whole_seconds_worth(
    limited: Callable[..., conveyor.Conveyor],
) -> None:
    cv = limited(max_send_rate=100)
    q, other = cv.create_queue("q"), cv.create_queue("other")
    q.send_batch([{"body": n} for n in range(100)])
    _refused(q, conveyor.Overloaded, lambda: q.send_batch([{"body": n} for n in range(100)]))
    other.send_batch([{"body": n} for n in range(100)])  # each queue has a bucket of its own
    assert backlog(q)[0] == backlog(other)[0] == 100


def test_a_queue_at_its_backlog_limit_refuses_sends_with_10251_until_it_is_drained(
    limited: Callable[..., conveyor.Conveyor],
) -> None:
    q = limited(max_backlog=5).create_queue("q")
    q.add_pull_consumer()
    q.send_batch([{"body": n} for n in range(3)])
    _refused(q, conveyor.StorageLimitExceeded, lambda: q.send_batch([{"body": n} for n in range(3)]))
    q.send_batch([{"body": n} for n in range(2)])  # exactly at the limit
    with pytest.raises(
        conveyor.StorageLimitExceeded, match=r"queue 'q' holds 5 messages; 1 more would pass its backlog limit of 5"
    ) as caught:
        q.send("x")
    assert caught.value.code == 10251 and isinstance(caught.value, conveyor.StorageError)
    q.ack(acks=[m.lease_id for m in q.pull(batch_size=5)])
    _until_taken(lambda: q.send("after the drain"), seconds=10)  # the figures are read again within 1 s
    assert backlog(q)[0] == 1


def test_a_queue_at_its_storage_limit_refuses_sends_with_10251(limited: Callable[..., conveyor.Conveyor]) -> None:
    q = limited(max_queue_bytes=100).create_queue("q")
    q.send("x" * 60, content_type="text")
    _refused(q, conveyor.StorageLimitExceeded, lambda: q.send("y" * 60, content_type="text"))
    with pytest.raises(conveyor.StorageLimitExceeded, match="holds 60 bytes; 41 more would pass its storage limit"):
        q.send("z" * 41, content_type="text")
    q.send("z" * 40, content_type="text")
    assert backlog(q) == (2, 100)


def test_limits_are_checked_when_given_and_a_client_of_a_server_is_told_to_give_them_to_the_server() -> None:
    assert not conveyor.QueueLimits().active
    for bad in [{"max_send_rate": 0}, {"max_send_rate": float("nan")}, {"max_backlog": 0}, {"max_queue_bytes": 1.5}]:
        with pytest.raises(conveyor.InvalidSetting, match=next(iter(bad))):
            conveyor.QueueLimits(**bad)  # type: ignore[arg-type]
    with pytest.raises(conveyor.InvalidRequest, match="conveyor serve --max-send-rate"):
        conveyor.connect("http://127.0.0.1:9", account_id="a", queue_limits=conveyor.QueueLimits(max_backlog=1))
