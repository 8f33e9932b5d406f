"""``App`` push workers consuming over HTTP (leases, heartbeats and settles through the server)."""

from __future__ import annotations

import threading
import time

import conveyor
from conveyor.server.testing import RunningServer


def test_app_over_http_consumes_acks_and_dead_letters(server: RunningServer) -> None:
    cv = server.connect("acc1")
    q = cv.create_queue("jobs")
    q.send_batch([{"body": {"n": i}} for i in range(30)])
    q.send({"poison": True})
    seen: list[int] = []
    app = conveyor.App(cv)

    @app.consumer("jobs", max_batch_size=10, max_batch_timeout=0.1, max_retries=1, dead_letter_queue="jobs-dlq")
    def handle(batch: conveyor.MessageBatch) -> None:
        for m in batch.messages:
            if m.body.get("poison"):
                m.retry()
            else:
                seen.append(m.body["n"])

    assert app.drain(timeout=30)
    assert sorted(seen) == list(range(30))
    assert q.metrics().backlog_count == 0
    dlq = cv.queue("jobs-dlq")
    assert [m.body for m in dlq.peek(10)] == [{"poison": True}]
    consumer = q.consumer()
    assert consumer is not None and consumer.type == "worker" and consumer.dead_letter_queue == "jobs-dlq"
    # The server stored the dead letter queue in the account's namespace, invisible to others.
    assert server.connect("acc2").list_queues() == []


def test_heartbeat_keeps_a_slow_handlers_lease_over_http(server: RunningServer) -> None:
    cv = server.connect("acc1")
    q = cv.create_queue("slow")
    q.send("work", content_type="text")
    deliveries: list[int] = []
    app = conveyor.App(cv)

    @app.consumer("slow", max_batch_size=1, max_batch_timeout=0, visibility_timeout_ms=1000)
    def handle(batch: conveyor.MessageBatch) -> None:
        deliveries.extend(m.attempts for m in batch.messages)
        time.sleep(2.5)  # two and a half lease lengths: only heartbeats keep the message from coming back

    thread = threading.Thread(target=app.drain, kwargs={"timeout": 20})
    thread.start()
    thread.join()
    assert deliveries == [1]
    assert q.counters().acked == 1
