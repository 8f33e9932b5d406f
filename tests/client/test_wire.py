"""The wire layer on its own: one decode refuses a bad body with Cloudflare's code, naming the field
by its path, and what the server renders the remote client reads back as the same model object."""

from __future__ import annotations

import pytest

from conveyor import errors, wire
from conveyor.model import ConsumerInfo, ConsumerSettings, QueueInfo, QueueSettings, StoredMessage


def refusal(raw: bytes, kind: type[object]) -> errors.ConveyorError:
    with pytest.raises(errors.InvalidRequest) as caught:
        wire.decode(raw, kind)
    return caught.value


def test_malformed_json_is_10208() -> None:
    assert type(refusal(b'{"messages": [', wire.BatchRequest)) is errors.MalformedJSON


def test_a_wrong_type_is_refused_naming_its_path() -> None:
    error = refusal(b'{"acks": [{"lease_id": "a"}, {"lease_id": 7}]}', wire.AckRequest)
    assert (error.code, error.message) == (10207, "acks[1].lease_id must be str, not int")


def test_a_mistake_inside_a_pushed_message_has_the_python_apis_code() -> None:
    error = refusal(b'{"messages": [{"body": 1}, {"body": 2, "content_type": 3}]}', wire.BatchRequest)
    assert (error.code, error.message) == (10203, "messages[1].content_type must be str, not int")
    error = refusal(b'{"messages": [{"body": 1}, {"bdy": 2}]}', wire.BatchRequest)
    assert error.code == 10203 and error.message.startswith("message 1 of the batch has unknown field 'bdy'")
    error = refusal(b'{"messages": [{"body": 1}, {}]}', wire.BatchRequest)
    assert (error.code, error.message) == (10203, "message 1 of the batch has no body")


def test_a_body_that_is_not_an_object_is_the_requests_mistake() -> None:
    error = refusal(b"[1, 2]", wire.PushedMessage)
    assert (error.code, error.message) == (10207, "the request body must be a JSON object, not a JSON array")


def test_an_unknown_field_of_a_nested_object_names_the_fields_it_takes() -> None:
    error = refusal(b'{"settings": {"retention": 60}}', wire.QueueRequest)
    assert error.message == (
        "settings has unknown field 'retention'; it takes delivery_delay, delivery_paused, message_retention_period"
    )


def test_an_empty_body_is_every_default_unless_one_is_required() -> None:
    assert wire.decode(b"", wire.PeekRequest, required=False).batch_size == 1
    assert refusal(b" ", wire.PeekRequest).message == "the request needs a JSON object body"


def test_a_pushed_json_body_is_kept_as_its_compact_text() -> None:
    batch = wire.decode(
        b'{"messages": [{"body": {"a": 1,  "big": 123456789012345678901234567890}}]}', wire.BatchRequest
    )
    stored = batch.messages[0].prepared(None)
    assert stored.body == b'{"a":1,"big":123456789012345678901234567890}' and stored.content_type == "json"


def test_what_the_server_renders_the_remote_client_reads_as_the_same_model() -> None:
    worker = ConsumerInfo(
        "c" * 32, "q" * 32, "q", "worker", "app:handle", "t0", "dlq", ConsumerSettings(max_concurrency=3)
    )
    pull = ConsumerInfo("d" * 32, "q" * 32, "q", "http_pull", "", "t0", "", ConsumerSettings(batch_size=5))
    info = QueueInfo("q" * 32, "q", "t0", "t1", QueueSettings(5, True, 600), (worker, pull), 2, "shard 1 is damaged")
    answer = wire.encode(wire.Envelope(result=wire.queue(info)))
    assert wire.decode_answer(answer, wire.Envelope[wire.Queue]).result.to_model() == info
    message = StoredMessage("m" * 32, 5, b"\x00\xff", "bytes", 2, "")
    assert wire.decode_answer(wire.encode(wire.peeked(message)), wire.PeekedMessage).to_model() == message


def test_a_pull_consumer_has_cloudflares_shape_without_the_worker_fields() -> None:
    pull = ConsumerInfo("d" * 32, "q" * 32, "q", "http_pull", "", "t0", "", ConsumerSettings(batch_size=5))
    shape = wire.to_builtins(wire.consumer(pull))
    assert "script_name" not in shape and set(shape["settings"]) == {
        "batch_size",
        "max_retries",
        "retry_delay",
        "visibility_timeout_ms",
    }
