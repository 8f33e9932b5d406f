"""The settings limits of the reference's table: retention, queue delivery delay, push and pull
consumer settings. A refused setting is ``InvalidSetting`` (10207, HTTP 400), names the setting
and the value, and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

import conveyor
from tests.conformance.support import backlog

SETTING = conveyor.InvalidSetting


def assert_setting_refused(excinfo: pytest.ExceptionInfo[conveyor.ConveyorError], name: str, value: Any) -> None:
    assert type(excinfo.value) is SETTING
    assert (excinfo.value.code, excinfo.value.status) == (10207, 400)
    assert f"{name} is {value!r}" in str(excinfo.value)


def test_queue_defaults_match_cloudflare(conveyor_client: conveyor.Conveyor) -> None:
    settings = conveyor_client.create_queue("q").info().settings
    assert settings == conveyor.QueueSettings(delivery_delay=0, delivery_paused=False, message_retention_period=345_600)


# Tables of refused values are checked in a loop inside one test: a deployment per engine is the
# expensive part of a conformance test, and these refusals need only one.


def test_retention_from_60_s_to_14_days_is_accepted(conveyor_client: conveyor.Conveyor) -> None:
    for n, retention in enumerate([60, 1_209_600]):
        q = conveyor_client.create_queue(f"q{n}", message_retention_period=retention)
        assert q.info().settings.message_retention_period == retention


def test_retention_out_of_range_is_refused(conveyor_client: conveyor.Conveyor) -> None:
    for retention in [59, 1_209_601, 0]:
        with pytest.raises(SETTING) as excinfo:
            conveyor_client.create_queue("q", message_retention_period=retention)
        assert_setting_refused(excinfo, "message_retention_period", retention)
        assert "60" in str(excinfo.value) and "1209600" in str(excinfo.value)
    assert conveyor_client.list_queues() == []


def test_queue_delivery_delay_out_of_range_is_refused(conveyor_client: conveyor.Conveyor) -> None:
    for delay in [-1, 86_401]:
        with pytest.raises(SETTING) as excinfo:
            conveyor_client.create_queue("q", delivery_delay=delay)
        assert_setting_refused(excinfo, "delivery_delay", delay)
    assert conveyor_client.list_queues() == []


def test_refused_queue_update_changes_nothing(queue: conveyor.Queue) -> None:
    before = queue.info().settings
    with pytest.raises(SETTING) as excinfo:
        queue.update(delivery_delay=10, message_retention_period=1_209_601)
    assert_setting_refused(excinfo, "message_retention_period", 1_209_601)
    assert queue.info().settings == before


# -- pull consumers ---------------------------------------------------------------------------
def test_pull_consumer_defaults_match_cloudflare(queue: conveyor.Queue) -> None:
    consumer = queue.add_pull_consumer()
    assert consumer.type == "http_pull"
    assert (consumer.settings.batch_size, consumer.settings.max_retries) == (5, 3)
    assert (consumer.settings.visibility_timeout_ms, consumer.settings.retry_delay) == (30_000, 0)
    assert consumer.dead_letter_queue == ""


PULL_SETTINGS_OUT_OF_RANGE = [
    ("batch_size", 0),
    ("batch_size", 101),
    ("max_retries", -1),
    ("max_retries", 101),
    ("retry_delay", -1),
    ("retry_delay", 86_401),
    ("visibility_timeout_ms", 0),
    ("visibility_timeout_ms", 43_200_001),
]


def test_pull_consumer_setting_out_of_range_is_refused(queue: conveyor.Queue) -> None:
    for setting, value in PULL_SETTINGS_OUT_OF_RANGE:
        with pytest.raises(SETTING) as excinfo:
            queue.add_pull_consumer(**{setting: value})  # type: ignore[arg-type]
        assert_setting_refused(excinfo, setting, value)
    assert queue.consumer() is None


def test_pull_consumer_settings_at_their_limits_are_accepted(queue: conveyor.Queue) -> None:
    consumer = queue.add_pull_consumer(
        batch_size=100, max_retries=100, retry_delay=86_400, visibility_timeout_ms=43_200_000
    )
    assert consumer.settings.visibility_timeout_ms == 43_200_000


def test_pull_request_out_of_range_is_refused(pull_queue: conveyor.Queue) -> None:
    pull_queue.send("a")
    for setting, value in [("batch_size", 0), ("batch_size", 101), ("visibility_timeout_ms", 0)]:
        with pytest.raises(conveyor.InvalidRequest) as excinfo:
            pull_queue.pull(**{setting: value})
        assert f"{setting} is {value}" in str(excinfo.value)
        assert excinfo.value.code == 10207
    assert pull_queue.counters().in_flight == 0


def test_pull_visibility_timeout_over_12_hours_is_refused(pull_queue: conveyor.Queue) -> None:
    pull_queue.send("a")
    with pytest.raises(conveyor.InvalidRequest) as excinfo:
        pull_queue.pull(visibility_timeout_ms=43_200_001)
    assert "visibility_timeout_ms is 43200001" in str(excinfo.value) and "43200000" in str(excinfo.value)
    assert [m.body for m in pull_queue.pull(visibility_timeout_ms=43_200_000)] == ["a"]


# -- push consumers ---------------------------------------------------------------------------
def handler(batch: conveyor.MessageBatch) -> None:
    """A push handler that acks (implicitly)."""


def test_push_consumer_defaults_match_cloudflare(conveyor_client: conveyor.Conveyor, queue: conveyor.Queue) -> None:
    app = conveyor.App(conveyor_client)
    app.consumer("q", max_batch_timeout=0)(handler)
    assert app.drain(10)
    settings = app.specs[0].settings
    consumer = queue.consumer()
    assert consumer is not None and consumer.type == "worker"
    assert consumer.script_name == f"{__name__}:handler"
    default = conveyor.App(conveyor_client)
    default.consumer("other")(handler)
    assert default.specs[0].settings == conveyor.ConsumerSettings(
        batch_size=10, max_retries=3, max_wait_time_ms=5000, max_concurrency=None, retry_delay=0
    )
    assert settings.max_wait_time_ms == 0


# (decorator argument, value, the setting the error names)
PUSH_SETTINGS_OUT_OF_RANGE = [
    ("max_batch_size", 0, "batch_size"),
    ("max_batch_size", 101, "batch_size"),
    ("max_batch_timeout", -1, "max_batch_timeout"),
    ("max_batch_timeout", 61, "max_batch_timeout"),
    ("max_retries", -1, "max_retries"),
    ("max_retries", 101, "max_retries"),
    ("retry_delay", 86_401, "retry_delay"),
    ("max_concurrency", 0, "max_concurrency"),
    ("max_concurrency", 251, "max_concurrency"),
]


def test_push_consumer_setting_out_of_range_is_refused(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue
) -> None:
    app = conveyor.App(conveyor_client)
    for setting, value, named in PUSH_SETTINGS_OUT_OF_RANGE:
        with pytest.raises(SETTING) as excinfo:
            app.consumer("q", **{setting: value})(handler)  # type: ignore[arg-type]
        assert_setting_refused(excinfo, named, value)
    assert app.specs == [] and queue.consumer() is None


def test_push_consumer_settings_at_their_limits_are_accepted(
    conveyor_client: conveyor.Conveyor, queue: conveyor.Queue
) -> None:
    app = conveyor.App(conveyor_client)
    app.consumer(
        "q", max_batch_size=100, max_batch_timeout=60, max_retries=100, retry_delay=86_400, max_concurrency=250
    )(handler)
    app.start()
    app.stop(grace=1)
    consumer = queue.consumer()
    assert consumer is not None
    assert (consumer.settings.batch_size, consumer.settings.max_concurrency) == (100, 250)
    assert backlog(queue) == (0, 0)
