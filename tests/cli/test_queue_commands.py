"""``conveyor queues ...``: each command's effect, its --json shape, and its refusals."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import conveyor
from conveyor.cli.main import cli
from conveyor.model import WorkerEntry, WorkerRun

from .support import QUEUE_KEYS, Cli


def test_create_prints_the_queue_and_json_has_cloudflare_shape(run: Cli, client: conveyor.Conveyor) -> None:
    assert "Created queue emails" in run.ok("queues", "create", "emails").stdout
    data = run.json(
        "queues", "create", "orders", "--delivery-delay-secs", "5", "--message-retention-period-secs", "600"
    )
    assert set(data) >= QUEUE_KEYS
    assert data["queue_name"] == "orders" and len(data["queue_id"]) == 32
    assert data["settings"] == {"delivery_delay": 5, "delivery_paused": False, "message_retention_period": 600}
    assert data["consumers"] == [] and data["consumers_total_count"] == 0
    assert client.queue("orders").info().settings.delivery_delay == 5


def test_invalid_queue_name_is_error_11003_on_one_line(run: Cli, client: conveyor.Conveyor) -> None:
    line = run.fails("queues", "create", "Bad_Name", code=11003)
    assert "invalid queue name 'Bad_Name'" in line
    assert client.list_queues() == []


def test_out_of_range_setting_is_refused_and_names_the_limit(run: Cli) -> None:
    line = run.fails("queues", "create", "q", "--message-retention-period-secs", "5", code=10207)
    assert "message_retention_period is 5" in line


def test_existing_queue_name_is_refused(run: Cli) -> None:
    run.ok("queues", "create", "emails")
    run.fails("queues", "create", "emails", code=11009)


def test_list_shows_every_queue_with_its_backlog(run: Cli, client: conveyor.Conveyor) -> None:
    assert "No queues yet" in run.ok("queues", "list").stdout
    run.ok("queues", "create", "beta")
    run.ok("queues", "create", "alpha")
    client.queue("beta").send_batch([{"body": n} for n in range(3)])
    table = run.ok("queues", "list").stdout
    assert "alpha" in table and "beta" in table and "3" in table
    data = run.json("queues", "list")
    assert [q["queue_name"] for q in data] == ["alpha", "beta"]
    assert all(set(q) >= QUEUE_KEYS for q in data)


def test_info_adds_metrics_and_counters_to_the_queue(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "emails")
    client.queue("emails").send({"to": "a@b"})
    assert "backlog" in run.ok("queues", "info", "emails").stdout
    data = run.json("queues", "info", "emails")
    assert QUEUE_KEYS | {"metrics", "counters"} <= set(data)
    assert data["metrics"]["backlog_count"] == 1 and data["metrics"]["backlog_bytes"] == len('{"to":"a@b"}')
    assert data["counters"]["sent"] == 1


def test_info_says_when_no_worker_runs_the_push_consumers_script(run: Cli, client: conveyor.Conveyor) -> None:
    q = client.create_queue("emails")
    q.add_consumer("worker", script_name="myapp.consumers:send_email")
    assert "no worker for this script" in run.ok("queues", "info", "emails").stdout
    (missing,) = run.json("queues", "info", "emails")["unserved"]
    assert missing["script_name"] == "myapp.consumers:send_email" and missing["status"] == "no worker for this script"

    # A live worker that runs the script on this queue serves it.
    running = WorkerRun(q.id, "emails", "myapp.consumers:send_email")
    client.engine.record_worker(WorkerEntry("w" * 32, "host", 1, client.engine.clock.now_ms(), 0, (running,)))
    assert "no worker" not in run.ok("queues", "info", "emails").stdout
    assert run.json("queues", "info", "emails")["unserved"] == []


def test_info_of_a_missing_queue_is_error_10104(run: Cli) -> None:
    assert "'nope'" in run.fails("queues", "info", "nope", code=10104)


def test_update_changes_only_the_given_settings(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "emails", "--delivery-delay-secs", "7")
    data = run.json("queues", "update", "emails", "--message-retention-period-secs", "3600")
    assert data["settings"]["message_retention_period"] == 3600
    assert data["settings"]["delivery_delay"] == 7
    assert client.queue("emails").info().settings.message_retention_period == 3600


def test_update_without_settings_is_a_usage_error(run: Cli) -> None:
    run.ok("queues", "create", "emails")
    result = run("queues", "update", "emails")
    assert result.exit_code == 2 and "nothing to update" in result.stderr


def test_pause_and_resume_delivery_flip_the_setting(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "emails")
    assert run.json("queues", "pause-delivery", "emails")["settings"]["delivery_paused"] is True
    assert client.queue("emails").info().settings.delivery_paused
    assert "Resumed delivery of queue emails" in run.ok("queues", "resume-delivery", "emails").stdout
    assert not client.queue("emails").info().settings.delivery_paused


def test_delete_removes_the_queue(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "emails")
    data = run.json("queues", "delete", "emails")
    assert data["deleted"] is True and data["queue_name"] == "emails"
    with pytest.raises(conveyor.QueueNotFound):
        client.queue("emails")


def test_delete_of_a_non_empty_queue_asks_for_its_name_unless_yes(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "emails")
    client.queue("emails").send_batch([{"body": n} for n in range(3)])

    refused = run("queues", "delete", "emails", input="email\n")
    assert refused.exit_code == 1 and "error: delete aborted" in refused.stderr
    assert "Queue emails holds 3 messages" in refused.stderr
    assert client.queue("emails").metrics().backlog_count == 3
    unanswered = run("queues", "delete", "emails", input="")
    assert unanswered.exit_code == 1
    assert client.queue("emails").metrics().backlog_count == 3

    assert "Deleted queue emails" in run.ok("queues", "delete", "emails", input="emails\n").stdout
    run.ok("queues", "create", "emails")
    client.queue("emails").send({"n": 1})
    assert run.json("queues", "delete", "emails", "--yes")["deleted"] is True
    with pytest.raises(conveyor.QueueNotFound):
        client.queue("emails")


def test_purge_with_force_deletes_every_message(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "emails")
    client.queue("emails").send_batch([{"body": n} for n in range(5)])
    data = run.json("queues", "purge", "emails", "--force")
    assert data["purged_count"] == 5 and data["queue_name"] == "emails"
    assert client.queue("emails").metrics().backlog_count == 0


def test_purge_asks_for_the_queue_name_and_aborts_on_a_mismatch(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "emails")
    client.queue("emails").send_batch([{"body": n} for n in range(2)])
    refused = run("queues", "purge", "emails", input="email\n")
    assert refused.exit_code == 1 and "error: purge aborted" in refused.stderr
    assert client.queue("emails").metrics().backlog_count == 2
    assert "2 messages deleted" in run.ok("queues", "purge", "emails", input="emails\n").stdout
    assert client.queue("emails").metrics().backlog_count == 0


def test_unknown_command_and_missing_argument_are_usage_errors(run: Cli) -> None:
    assert run("queues", "frobnicate").exit_code == 2
    assert run("queues", "create").exit_code == 2


def test_every_command_has_help(run: Cli) -> None:
    for args in (
        [],
        ["queues"],
        ["queues", "create"],
        ["queues", "purge"],
        ["queues", "consumer"],
        ["queues", "consumer", "add"],
        ["queues", "consumer", "http", "add"],
        ["send"],
        ["pull"],
        ["worker"],
        ["demo"],
    ):
        result = run.ok(*args, "--help")
        assert "Usage: " in result.stdout and "--help" in result.stdout


def test_conveyor_url_environment_variable_names_the_deployment(url: str, client: conveyor.Conveyor) -> None:
    result = CliRunner().invoke(cli, ["queues", "create", "from-env"], env={"CONVEYOR_URL": url})
    assert result.exit_code == 0, result.output
    assert client.queue("from-env").name == "from-env"
