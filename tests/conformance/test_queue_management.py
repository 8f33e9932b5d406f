"""Queue management: create / list / get / update / delete, the name rule, ids, one consumer per
queue, pause and resume, purge, peek."""

from __future__ import annotations

import pytest

import conveyor
from conveyor import limits
from tests.conformance.support import FakeClock, backlog, bodies, refused


def handler(batch: conveyor.MessageBatch) -> None:
    """A push handler that acks (implicitly)."""


def test_created_queue_has_a_32_hex_id_and_its_settings(conveyor_client: conveyor.Conveyor) -> None:
    q = conveyor_client.create_queue("emails", delivery_delay=5, message_retention_period=600)
    info = q.info()
    assert limits.ID_PATTERN.match(info.queue_id)
    assert (info.queue_name, info.settings) == ("emails", conveyor.QueueSettings(5, False, 600))
    assert info.consumers == ()
    assert info.created_on and info.modified_on


def test_queue_by_name_and_by_id_is_the_same_queue(conveyor_client: conveyor.Conveyor) -> None:
    q = conveyor_client.create_queue("emails")
    assert conveyor_client.queue("emails").id == q.id
    assert conveyor_client.queue_by_id(q.id).name == "emails"


def test_list_queues_is_ordered_by_name(conveyor_client: conveyor.Conveyor) -> None:
    for name in ("b", "c", "a"):
        conveyor_client.create_queue(name)
    assert [q.queue_name for q in conveyor_client.list_queues()] == ["a", "b", "c"]


def test_duplicate_queue_name_is_refused(conveyor_client: conveyor.Conveyor) -> None:
    q = conveyor_client.create_queue("emails")
    with pytest.raises(conveyor.QueueExists) as excinfo:
        conveyor_client.create_queue("emails", delivery_delay=9)
    assert "'emails'" in str(excinfo.value) and excinfo.value.status == 409
    assert [i.queue_id for i in conveyor_client.list_queues()] == [q.id]
    assert q.info().settings.delivery_delay == 0


def test_missing_queue_raises_queue_not_found_10104(conveyor_client: conveyor.Conveyor) -> None:
    with pytest.raises(conveyor.QueueNotFound) as excinfo:
        conveyor_client.queue("nope")
    assert (excinfo.value.code, excinfo.value.status) == (10104, 404)
    assert "'nope'" in str(excinfo.value)
    with pytest.raises(conveyor.QueueNotFound):
        conveyor_client.queue_by_id("0" * 32)
    with pytest.raises(conveyor.QueueNotFound):
        conveyor_client.delete_queue("nope")


VALID_NAMES = ["a", "q1", "my-queue", "0-9", "a" * 63]
INVALID_NAMES = ["", "Emails", "-a", "a-", "a_b", "a.b", "a b", "a" * 64, "é", "a/b", "q\n"]


def test_valid_queue_names_are_accepted(conveyor_client: conveyor.Conveyor) -> None:
    for name in VALID_NAMES:
        assert conveyor_client.create_queue(name).name == name


def test_invalid_queue_names_are_refused_with_11003(conveyor_client: conveyor.Conveyor) -> None:
    for name in INVALID_NAMES:
        with pytest.raises(conveyor.InvalidQueueName) as excinfo:
            conveyor_client.create_queue(name)
        assert (excinfo.value.code, excinfo.value.status) == (11003, 400)
        assert repr(name) in str(excinfo.value)
    assert conveyor_client.list_queues() == []


def test_invalid_name_lookups_are_refused_with_11003(conveyor_client: conveyor.Conveyor) -> None:
    with pytest.raises(conveyor.InvalidQueueName):
        conveyor_client.queue("Bad_Name")
    q = conveyor_client.create_queue("q")
    with pytest.raises(conveyor.InvalidQueueName):
        q.add_pull_consumer(dead_letter_queue="Bad_Name")
    assert q.consumer() is None


def test_update_changes_only_the_given_settings(queue: conveyor.Queue) -> None:
    queue.update(delivery_delay=10)
    assert queue.update(message_retention_period=120).settings == conveyor.QueueSettings(10, False, 120)
    assert queue.info().settings == conveyor.QueueSettings(10, False, 120)


def test_deleted_queue_is_gone_with_its_messages(conveyor_client: conveyor.Conveyor) -> None:
    q = conveyor_client.create_queue("q")
    q.send("a")
    conveyor_client.delete_queue("q")
    assert conveyor_client.list_queues() == []
    with pytest.raises(conveyor.QueueNotFound):
        q.send("b")
    assert conveyor_client.create_queue("q").metrics() == conveyor.Metrics(0, 0, 0)


def test_queue_can_be_its_own_dlq_never(queue: conveyor.Queue) -> None:
    with pytest.raises(conveyor.InvalidRequest, match="its own dead letter queue"):
        queue.add_pull_consumer(dead_letter_queue="q")
    assert queue.consumer() is None


# -- one consumer per queue -------------------------------------------------------------------
def test_consumer_gets_a_32_hex_id(queue: conveyor.Queue) -> None:
    consumer = queue.add_pull_consumer(dead_letter_queue="q-dlq")
    assert limits.ID_PATTERN.match(consumer.consumer_id)
    assert (consumer.queue_name, consumer.dead_letter_queue) == ("q", "q-dlq")
    assert queue.consumer() == consumer


def test_second_pull_consumer_is_refused_with_11004(queue: conveyor.Queue) -> None:
    first = queue.add_pull_consumer()
    with pytest.raises(conveyor.ConsumerExists) as excinfo:
        queue.add_pull_consumer(batch_size=9)
    assert (excinfo.value.code, excinfo.value.status) == (11004, 409)
    assert queue.consumer() == first


def test_push_consumer_on_a_queue_with_a_pull_consumer_is_refused_with_11004(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue
) -> None:
    first = queue.add_pull_consumer()
    app = conveyor.App(conveyor_client)
    app.consumer("q")(handler)
    with pytest.raises(conveyor.ConsumerExists) as excinfo:
        app.start()
    assert excinfo.value.code == 11004
    assert queue.consumer() == first


def test_pull_consumer_on_a_queue_with_a_push_consumer_is_refused_with_11004(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue
) -> None:
    app = conveyor.App(conveyor_client)
    app.consumer("q", max_batch_timeout=0)(handler)
    assert app.drain(10)
    with pytest.raises(conveyor.ConsumerExists):
        queue.add_pull_consumer()
    consumer = queue.consumer()
    assert consumer is not None and consumer.type == "worker"


def test_same_worker_registering_again_updates_its_settings(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue
) -> None:
    for size in (3, 7):
        app = conveyor.App(conveyor_client)
        app.consumer("q", max_batch_size=size, max_batch_timeout=0)(handler)
        assert app.drain(10)
    consumer = queue.consumer()
    assert consumer is not None and consumer.settings.batch_size == 7
    assert len(queue.info().consumers) == 1


def test_one_app_cannot_declare_two_consumers_of_one_queue(conveyor_client: conveyor.Conveyor) -> None:
    app = conveyor.App(conveyor_client)
    app.consumer("q")(handler)
    with pytest.raises(conveyor.ConsumerExists):
        app.consumer("q")(handler)


def test_removed_consumer_frees_the_queue(queue: conveyor.Queue) -> None:
    queue.add_pull_consumer()
    queue.remove_consumer()
    assert queue.consumer() is None
    with pytest.raises(conveyor.ConsumerNotFound):
        queue.remove_consumer()
    assert queue.add_pull_consumer(batch_size=2).settings.batch_size == 2


# -- pause, purge, peek -----------------------------------------------------------------------
def test_pause_and_resume_set_delivery_paused(queue: conveyor.Queue) -> None:
    assert queue.pause_delivery().settings.delivery_paused is True
    assert queue.info().settings.delivery_paused is True
    assert queue.resume_delivery().settings.delivery_paused is False


def test_paused_queue_still_accepts_sends(queue: conveyor.Queue) -> None:
    queue.pause_delivery()
    assert queue.send("a").metrics.backlog_count == 1
    assert queue.send_batch([{"body": "b"}]).metrics.backlog_count == 2


def test_purge_deletes_stored_delayed_and_in_flight_messages(pull_queue: conveyor.Queue, clock: FakeClock) -> None:
    pull_queue.send_batch([{"body": i} for i in range(3)])
    pull_queue.send("delayed", delay_seconds=600)
    [leased] = pull_queue.pull(batch_size=1)
    assert pull_queue.purge() == 4
    assert pull_queue.metrics() == conveyor.Metrics(0, 0, 0)
    clock.advance(600)
    assert pull_queue.pull() == []
    result = pull_queue.ack(acks=[leased.lease_id])
    assert result.ack_count == 0 and leased.lease_id in result.warnings
    assert pull_queue.metrics() == conveyor.Metrics(0, 0, 0)


def test_queue_works_normally_after_a_purge(pull_queue: conveyor.Queue) -> None:
    pull_queue.send("old")
    pull_queue.purge()
    pull_queue.send("new")
    assert [m.body for m in pull_queue.pull()] == ["new"]
    assert backlog(pull_queue) == (1, 5)


def test_peek_reads_without_leasing(pull_queue: conveyor.Queue) -> None:
    pull_queue.send_batch([{"body": i} for i in range(3)])
    peeked = pull_queue.peek(batch_size=10)
    assert sorted(m.body for m in peeked) == [0, 1, 2]
    assert all(m.lease_id == "" and m.attempts == 0 for m in peeked)
    assert pull_queue.counters().in_flight == 0
    pulled = pull_queue.pull(batch_size=10)
    assert sorted(m.id for m in pulled) == sorted(m.id for m in peeked)
    assert all(m.attempts == 1 for m in pulled)


def test_peek_returns_at_most_batch_size_messages(queue: conveyor.Queue) -> None:
    queue.send_batch([{"body": i} for i in range(5)])
    assert len(queue.peek(batch_size=2)) == 2
    for size in (0, 101):
        with pytest.raises(conveyor.InvalidRequest, match=f"batch_size is {size}"):
            queue.peek(batch_size=size)


def test_peek_shows_leased_and_delayed_messages(pull_queue: conveyor.Queue, clock: FakeClock) -> None:
    pull_queue.send("leased")
    pull_queue.pull()
    pull_queue.send("delayed", delay_seconds=60)
    assert sorted(bodies(pull_queue)) == ["delayed", "leased"]


def test_send_to_a_queue_deleted_by_another_connection_is_refused(
    conveyor_client: conveyor.Conveyor, second_client: conveyor.Conveyor
) -> None:
    q = conveyor_client.create_queue("q")
    q.send("before")
    second_client.delete_queue("q")
    with pytest.raises(conveyor.QueueNotFound):
        q.send("after")
    assert conveyor_client.list_queues() == []
    assert conveyor_client.create_queue("q").metrics() == conveyor.Metrics(0, 0, 0)


def test_malformed_queue_id_is_refused_with_10107(conveyor_client: conveyor.Conveyor) -> None:
    for queue_id in ["xyz", "A" * 32, "0" * 31, "0" * 33, "g" * 32, "0" * 32 + "\n"]:
        with pytest.raises(conveyor.InvalidQueueId) as excinfo:
            conveyor_client.queue_by_id(queue_id)
        assert (excinfo.value.code, excinfo.value.status) == (10107, 400)
        assert repr(queue_id) in str(excinfo.value)


def test_a_worker_consumer_must_name_a_handler_or_a_worker(queue: conveyor.Queue) -> None:
    for script in ("not a script", ".x:y", "x.:y", "", "x:y z"):
        text = refused(queue, conveyor.InvalidRequest, 10207, queue.add_consumer, "worker", script_name=script)
        assert "invalid script_name" in text
    assert queue.consumer() is None
    assert queue.add_consumer("worker", script_name="myapp.consumers:handle").script_name == "myapp.consumers:handle"


def test_catalog_only_reads_agree_with_list_queues(conveyor_client: conveyor.Conveyor) -> None:
    """``queue_names``, ``queues_named`` and ``dead_letter_sources`` (the dashboard's catalog-only
    reads) give what ``list_queues`` gives, in its order; missing names are left out."""
    for name in ("orders-dlq", "b", "orders", "a", "ab"):
        conveyor_client.create_queue(name)
    conveyor_client.queue("orders").add_pull_consumer(dead_letter_queue="orders-dlq")
    conveyor_client.queue("a").add_pull_consumer(dead_letter_queue="orders-dlq")
    engine = conveyor_client.engine
    listed = conveyor_client.list_queues()
    assert engine.queue_names() == [q.queue_name for q in listed] == ["a", "ab", "b", "orders", "orders-dlq"]
    assert engine.queue_names("a") == ["a", "ab"] and engine.queue_names("zz") == []
    named = engine.queues_named(["orders", "nope", "a"])
    assert named == [q for q in listed if q.queue_name in ("a", "orders")]
    assert named[1].consumers[0].dead_letter_queue == "orders-dlq" and engine.queues_named([]) == []
    assert engine.dead_letter_sources("orders-dlq") == ["a", "orders"]
    assert engine.dead_letter_sources("b") == []
