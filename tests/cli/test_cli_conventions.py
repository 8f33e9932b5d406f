"""What every command does alike: ``--json`` before or after the command, one ``error:`` form,
tables a script can read, counts in words, a visibility timeout in either unit, ``--account``."""

from __future__ import annotations

import json

import conveyor
from tests.waiting import wait_for

from .support import Cli


def test_json_before_the_command_works_like_after(run: Cli) -> None:
    run.ok("queues", "create", "emails")
    before = json.loads(run.ok("--json", "queues", "list").stdout)
    after = run.json("queues", "list")
    assert [q["queue_name"] for q in before] == [q["queue_name"] for q in after] == ["emails"]
    sent = json.loads(run.ok("--json", "send", "emails", "1").stdout)
    assert len(sent["message_ids"][0]) == 32


def test_usage_errors_say_error_as_every_other_refusal(run: Cli) -> None:
    for args in (["queues", "frobnicate"], ["queues", "create"], ["--frobnicate", "queues", "list"]):
        result = run(*args)
        assert result.exit_code == 2, result.output
        assert "\nerror: " in result.stderr and "Error:" not in result.stderr, result.stderr
        assert "Usage: " in result.stderr
    refused = run("send", "missing", "1")
    assert refused.exit_code == 1 and refused.stderr.startswith("error: ")


def test_a_table_to_a_pipe_keeps_every_id_whole_on_its_row(run: Cli, client: conveyor.Conveyor) -> None:
    names = ["a-queue-with-a-rather-long-name-to-fill-the-line", "b", "c"]
    for name in names:
        client.create_queue(name).send("x", content_type="text")
    out = run.ok("queues", "list").stdout
    for name in names:
        [row] = [line for line in out.splitlines() if f" {name} " in line]
        assert client.queue(name).id in row
    client.queue("b").add_pull_consumer()
    pulled = run.ok("pull", "b").stdout
    [m] = client.queue("b").peek()
    assert any(m.id in line and "x" in line for line in pulled.splitlines()), pulled


def test_one_is_singular(run: Cli, client: conveyor.Conveyor) -> None:
    client.create_queue("emails").send(1)
    info = run.ok("queues", "info", "emails").stdout
    assert "1 message, " in info and "1 messages" not in info
    assert run.ok("send", "emails", "2").stdout.startswith("Sent 1 message to emails")


def test_the_visibility_timeout_is_taken_in_seconds_or_milliseconds(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "a")
    run.ok("queues", "create", "b")
    added = run.json("queues", "consumer", "http", "add", "a", "--visibility-timeout-ms", "45000")
    assert added["settings"]["visibility_timeout_ms"] == 45_000
    added = run.json("queues", "consumer", "http", "add", "b", "--visibility-timeout-secs", "45")
    assert added["settings"]["visibility_timeout_ms"] == 45_000
    client.queue("a").send("x", content_type="text")
    assert len(run.json("pull", "a", "--visibility-timeout-secs", "1")["messages"]) == 1
    assert run.json("pull", "a")["messages"] == []
    again = wait_for(lambda: run.json("pull", "a")["messages"], what="the message back when its 1 s lease ran out")
    assert len(again) == 1
    both = run("pull", "a", "--visibility-timeout-secs", "1", "--visibility-timeout-ms", "1000")
    assert both.exit_code == 2 and "not both" in both.stderr


def test_a_consumer_script_that_names_no_handler_is_refused(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "emails")
    error = run.fails("queues", "consumer", "add", "emails", "not a script", code=10207)
    assert "invalid script_name 'not a script'" in error
    assert client.queue("emails").consumer() is None
    run.ok("queues", "consumer", "add", "emails", "myapp.consumers:handle")


def test_the_account_option_picks_the_account(run: Cli, url: str) -> None:
    run.ok("--account", "acc1", "queues", "create", "billing")
    run.ok("queues", "create", "emails")
    assert [q["queue_name"] for q in run.json("--account-id", "acc1", "queues", "list")] == ["billing"]
    assert [q["queue_name"] for q in run.json("queues", "list")] == ["emails"]
    with conveyor.connect(url, account_id="acc1") as acc1:
        assert [q.queue_name for q in acc1.list_queues()] == ["billing"]
