"""``conveyor send|pull|ack|peek|redrive``: messages in and out from the shell."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import conveyor

from .support import Cli


def test_send_stores_a_json_body_and_reports_metrics(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "emails")
    assert "Sent 1 message to emails" in run.ok("send", "emails", '{"to": "a@b"}').stdout
    data = run.json("send", "emails", "[1, 2]")
    assert data == {
        "message_ids": data["message_ids"],
        "metadata": {
            "metrics": {
                "backlog_count": 2,
                "backlog_bytes": len('{"to":"a@b"}') + len("[1,2]"),
                "oldest_message_timestamp_ms": data["metadata"]["metrics"]["oldest_message_timestamp_ms"],
            }
        },
    }
    peeked = client.queue("emails").peek()
    assert [m.body for m in peeked] == [{"to": "a@b"}, [1, 2]]
    assert [peeked[1].id] == data["message_ids"]


def test_send_prints_the_message_id(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "emails")
    out = run.ok("send", "emails", '"hi"').stdout
    [m] = client.queue("emails").peek()
    assert out == f"Sent 1 message to emails: {m.id}\n"


def test_send_whole_stdin_as_one_bytes_message(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "blobs")
    blob = b"\x00line one\nline two\n\xff\r\n"
    data = run.json("send", "blobs", "--content-type", "bytes", "--whole", input=blob)
    [m] = client.queue("blobs").peek()
    assert (m.body, [m.id]) == (blob, data["message_ids"])


def test_send_whole_file_as_one_json_document(run: Cli, client: conveyor.Conveyor, tmp_path: Path) -> None:
    run.ok("queues", "create", "docs")
    doc = tmp_path / "doc.json"
    doc.write_text('{\n  "to": "a@b",\n  "n": [1,\n 2]\n}\n')
    run.ok("send", "docs", "--file", str(doc), "--whole")
    assert [m.body for m in client.queue("docs").peek()] == [{"to": "a@b", "n": [1, 2]}]


def test_send_whole_with_a_body_is_a_usage_error(run: Cli) -> None:
    run.ok("queues", "create", "docs")
    result = run("send", "docs", '"x"', "--whole")
    assert result.exit_code == 2 and "error: --whole sends a file or stdin as one message" in result.stderr


def test_send_text_and_bytes_and_delay(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "logs")
    run.ok("send", "logs", "plain words", "--content-type", "text")
    run.ok("send", "logs", "raw", "--content-type", "bytes")
    run.ok("send", "logs", '"later"', "--delay-secs", "3600")
    peeked = {m.content_type: m.body for m in client.queue("logs").peek()}
    assert peeked == {"text": "plain words", "bytes": b"raw", "json": "later"}
    pulled_now = client.queue("logs")
    pulled_now.add_pull_consumer(batch_size=10)
    assert len(pulled_now.pull()) == 2  # the delayed message is not deliverable yet


def test_send_of_invalid_json_is_error_10208_and_stores_nothing(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "emails")
    assert "--content-type text" in run.fails("send", "emails", "hello", code=10208)
    assert client.queue("emails").metrics().backlog_count == 0


def test_send_to_a_missing_queue_is_error_10104(run: Cli) -> None:
    run.fails("send", "nope", "1", code=10104)


def test_send_file_sends_each_line_in_batches(run: Cli, client: conveyor.Conveyor, tmp_path: Path) -> None:
    run.ok("queues", "create", "bulk")
    lines = tmp_path / "messages.jsonl"
    lines.write_text("".join(json.dumps({"n": n}) + "\n" + ("\n" if n % 50 == 0 else "") for n in range(250)))
    data = run.json("send", "bulk", "--file", str(lines))
    assert data["sent_count"] == 250 and data["batch_count"] == 3
    assert data["metadata"]["metrics"]["backlog_count"] == 250
    assert client.queue("bulk").counters().sent == 250


def test_send_reads_stdin_lines_when_no_body_is_given(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "bulk")
    result = run.ok("send", "bulk", "--content-type", "text", input="one\ntwo\r\nthree\n")
    assert "Sent 3 messages to bulk in 1 batch" in result.stdout
    assert sorted(m.body for m in client.queue("bulk").peek()) == ["one", "three", "two"]


def test_send_splits_batches_by_bytes_too(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "bulk")
    big = "x" * 100_000  # three fit in no 256 KB batch: one batch per two messages
    data = run.json("send", "bulk", "--content-type", "text", input=f"{big}\n{big}\n{big}\n")
    assert data["sent_count"] == 3 and data["batch_count"] == 2


def test_send_file_with_a_bad_line_names_the_line(run: Cli, tmp_path: Path) -> None:
    run.ok("queues", "create", "bulk")
    lines = tmp_path / "bad.jsonl"
    lines.write_text('{"n": 1}\n{oops\n')
    assert "line 2 is not valid JSON" in run.fails("send", "bulk", "--file", str(lines), code=10208)


def test_a_bad_line_after_some_batches_says_what_was_sent(run: Cli, client: conveyor.Conveyor, tmp_path: Path) -> None:
    run.ok("queues", "create", "bulk")
    lines = tmp_path / "partly.jsonl"
    lines.write_text("".join(f"{n}\n" for n in range(150)) + "{oops\n")
    line = run.fails("send", "bulk", "--file", str(lines), code=10208)
    assert "line 151 is not valid JSON" in line and "the 100 messages up to line 100 were sent" in line
    assert client.queue("bulk").metrics().backlog_count == 100


def test_an_oversized_line_is_error_10204_naming_the_line(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "bulk")
    line = run.fails("send", "bulk", "--content-type", "text", input="small\n" + "x" * 128_001 + "\n", code=10204)
    assert "line 2 is 128001 bytes; the limit is 128000" in line
    assert client.queue("bulk").metrics().backlog_count == 0


def test_body_and_file_together_is_a_usage_error(run: Cli, tmp_path: Path) -> None:
    (tmp_path / "one.txt").write_text("1\n")
    assert run("send", "bulk", "1", "--file", str(tmp_path / "one.txt")).exit_code == 2


def test_pull_needs_an_http_consumer(run: Cli) -> None:
    run.ok("queues", "create", "jobs")
    assert "consumer http add" in run.fails("pull", "jobs", code=10207)


def test_pull_then_ack_by_lease_id(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "jobs")
    run.ok("queues", "consumer", "http", "add", "jobs")
    client.queue("jobs").send_batch([{"body": {"n": n}} for n in range(3)])
    client.queue("jobs").send(b"\x00\x01", content_type="bytes")
    pulled = run.json("pull", "jobs", "--batch-size", "10", "--visibility-timeout-ms", "60000")
    messages = pulled["messages"]
    assert len(messages) == 4 and pulled["message_backlog_count"] == 4
    assert set(messages[0]) == {"id", "body", "attempts", "lease_id", "timestamp_ms", "metadata"}
    assert {m["metadata"]["CF-Content-Type"] for m in messages} == {"json", "bytes"}
    assert base64.b64encode(b"\x00\x01").decode() in [m["body"] for m in messages]
    assert all(m["attempts"] == 1 for m in messages)
    leases = [m["lease_id"] for m in messages]
    acked = run.json("ack", "jobs", *leases[:3], "--retry", leases[3], "--delay-secs", "0")
    assert acked == {"ackCount": 3, "retryCount": 1, "warnings": {}}
    assert client.queue("jobs").metrics().backlog_count == 1


def test_pull_with_ack_deletes_what_it_pulled(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "jobs")
    run.ok("queues", "consumer", "http", "add", "jobs")
    client.queue("jobs").send_batch([{"body": n} for n in range(2)])
    data = run.json("pull", "jobs", "--ack")
    assert data["ack"]["ackCount"] == 2
    assert client.queue("jobs").metrics().backlog_count == 0
    assert "no messages" in run.ok("pull", "jobs").stdout


def test_pull_on_a_paused_queue_is_refused(run: Cli) -> None:
    run.ok("queues", "create", "jobs")
    run.ok("queues", "consumer", "http", "add", "jobs")
    run.ok("queues", "pause-delivery", "jobs")
    assert "queue_delivery_paused" in run.fails("pull", "jobs", code=409)


def test_peek_shows_messages_without_leasing_them(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "jobs")
    client.queue("jobs").send({"hello": "world"})
    assert '{"hello":"world"}' in run.ok("peek", "jobs").stdout
    data = run.json("peek", "jobs", "--batch-size", "5")
    assert [m["body"] for m in data["messages"]] == [{"hello": "world"}]
    assert client.queue("jobs").metrics().backlog_count == 1
    run.fails("peek", "jobs", "--batch-size", "0", code=10207)


def test_redrive_moves_dead_letters_back(run: Cli, client: conveyor.Conveyor) -> None:
    run.ok("queues", "create", "jobs")
    run.ok("queues", "create", "jobs-dlq")
    client.queue("jobs-dlq").send_batch([{"body": n} for n in range(30)])
    data = run.json("redrive", "jobs-dlq", "--to", "jobs")
    assert data == {"queue_name": "jobs-dlq", "to": "jobs", "redriven_count": 30}
    assert client.queue("jobs").metrics().backlog_count == 30
    assert client.queue("jobs-dlq").metrics().backlog_count == 0
    assert "Redrove 0 messages" in run.ok("redrive", "jobs-dlq", "--to", "jobs").stdout
    run.fails("redrive", "jobs-dlq", "--to", "missing", code=10104)
    assert run("redrive", "jobs-dlq").exit_code == 2
