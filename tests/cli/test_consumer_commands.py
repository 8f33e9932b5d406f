"""``conveyor queues consumer ...``: worker and HTTP pull consumers in the catalog."""

from __future__ import annotations

import conveyor

from .support import PULL_CONSUMER_KEYS, WORKER_CONSUMER_KEYS, Cli


def test_consumer_add_registers_a_worker_consumer_with_its_settings(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "emails")
    data = run.json(
        "queues", "consumer", "add", "emails", "mailer:handle",
        "--batch-size", "25", "--batch-timeout", "1.5", "--message-retries", "2",
        "--dead-letter-queue", "emails-dlq", "--max-concurrency", "4", "--retry-delay-secs", "30",
    )  # fmt: skip
    assert set(data) >= WORKER_CONSUMER_KEYS
    assert data["type"] == "worker" and data["script_name"] == data["script"] == "mailer:handle"
    assert data["dead_letter_queue"] == "emails-dlq"
    assert data["settings"] == {
        "batch_size": 25,
        "max_retries": 2,
        "max_wait_time_ms": 1500,
        "max_concurrency": 4,
        "retry_delay": 30,
        "visibility_timeout_ms": 30_000,
    }
    consumer = client.queue("emails").consumer()
    assert consumer is not None and consumer.type == "worker" and consumer.script_name == "mailer:handle"
    assert consumer.settings.batch_size == 25 and consumer.dead_letter_queue == "emails-dlq"


def test_consumer_add_uses_cloudflare_defaults(run: Cli) -> None:
    run.ok("queues", "create", "emails")
    data = run.json("queues", "consumer", "add", "emails", "mailer")
    assert data["settings"] == {
        "batch_size": 10,
        "max_retries": 3,
        "max_wait_time_ms": 5000,
        "max_concurrency": None,
        "retry_delay": 0,
        "visibility_timeout_ms": 30_000,
    }
    assert data["dead_letter_queue"] == ""


def test_a_second_consumer_is_error_11004(run: Cli) -> None:
    run.ok("queues", "create", "emails")
    run.ok("queues", "consumer", "add", "emails", "mailer")
    run.fails("queues", "consumer", "add", "emails", "other", code=11004)
    run.fails("queues", "consumer", "http", "add", "emails", code=11004)


def test_out_of_range_consumer_settings_are_refused(run: Cli) -> None:
    run.ok("queues", "create", "emails")
    assert "batch_size is 101" in run.fails(
        "queues", "consumer", "add", "emails", "m", "--batch-size", "101", code=10207
    )
    run.fails("queues", "consumer", "add", "emails", "m", "--batch-timeout", "61", code=10207)
    run.fails("queues", "consumer", "add", "emails", "m", "--dead-letter-queue", "Bad!", code=11003)


def test_consumer_list_and_remove(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "emails")
    assert run.json("queues", "consumer", "list", "emails") == []
    run.ok("queues", "consumer", "add", "emails", "mailer")
    listed = run.json("queues", "consumer", "list", "emails")
    assert [c["script_name"] for c in listed] == ["mailer"]
    assert "mailer" in run.ok("queues", "consumer", "list", "emails").stdout
    run.fails("queues", "consumer", "remove", "emails", "someone-else", code=11001)
    assert "Removed worker consumer mailer" in run.ok("queues", "consumer", "remove", "emails", "mailer").stdout
    assert client.queue("emails").consumer() is None
    run.fails("queues", "consumer", "remove", "emails", "mailer", code=11001)


def test_http_consumer_add_and_remove(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "jobs")
    data = run.json(
        "queues", "consumer", "http", "add", "jobs",
        "--batch-size", "7", "--message-retries", "1", "--visibility-timeout-secs", "60", "--retry-delay-secs", "3",
    )  # fmt: skip
    assert set(data) >= PULL_CONSUMER_KEYS and data["type"] == "http_pull"
    assert data["settings"] == {"batch_size": 7, "max_retries": 1, "retry_delay": 3, "visibility_timeout_ms": 60_000}
    run.fails("queues", "consumer", "remove", "jobs", "anything", code=11001)
    assert run.json("queues", "consumer", "http", "remove", "jobs")["deleted"] is True
    assert client.queue("jobs").consumer() is None
