"""``/metrics`` in Prometheus' format, and JSON logs with a request id on every line."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from conveyor.server.testing import RunningServer

from .process import serve_process


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_report_per_queue_figures_and_request_latency(server: RunningServer) -> None:
    cv = server.connect("acc1")
    q = cv.create_queue("emails")
    q.send_batch([{"body": i} for i in range(5)])
    q.add_pull_consumer()
    pulled = q.pull(batch_size=3)
    q.ack(acks=[pulled[0].lease_id], retries=[pulled[1].lease_id])
    server.connect("acc2").create_queue("private")
    secret, _ = server.tokens.create("acc1")

    r = httpx.get(server.url + "/metrics", headers={"authorization": f"Bearer {secret}"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    samples = _samples(r.text)
    key = (("account", "acc1"), ("queue", "emails"))
    assert samples[("conveyor_queue_backlog_messages", key)] == 4
    assert samples[("conveyor_queue_sent_messages_total", key)] == 5
    assert samples[("conveyor_queue_acked_messages_total", key)] == 1
    assert samples[("conveyor_queue_retried_messages_total", key)] == 1
    assert samples[("conveyor_queue_dead_lettered_messages_total", key)] == 0
    assert samples[("conveyor_queue_expired_messages_total", key)] == 0
    assert samples[("conveyor_queue_in_flight_messages", key)] == 1
    assert samples[("conveyor_queue_oldest_message_age_seconds", key)] >= 0
    assert ("conveyor_queue_backlog_bytes", key) in samples
    # Another account's queue is not even named in this account's scrape.
    assert "private" not in r.text and "acc2" not in r.text
    latency = [k for k in samples if k[0] == "conveyor_http_request_duration_seconds_count"]
    routes = {dict(labels)["route"] for _, labels in latency}
    assert "/client/v4/accounts/{account_id}/queues" in routes


def test_metrics_need_a_token(server: RunningServer) -> None:
    assert httpx.get(server.url + "/metrics").status_code == 401


def test_json_logs_carry_the_request_id_on_every_line(tmp_path: Path) -> None:
    with serve_process(tmp_path / "data", "acc1", "--log-json", "--log-level", "debug") as proc:
        headers = {"authorization": f"Bearer {proc.token}", "x-request-id": "trace-abc-123"}
        r = httpx.post(f"{proc.url}/client/v4/accounts/acc1/queues", json={"queue_name": "logged"}, headers=headers)
        assert r.status_code == 200 and r.headers["x-request-id"] == "trace-abc-123"
        generated = httpx.get(f"{proc.url}/client/v4/accounts/acc1/queues", headers={"authorization": "Bearer bad"})
        rid = generated.headers["x-request-id"]
        log_file = next(tmp_path.glob("serve-*.log"))
        deadline = time.monotonic() + 10
        while rid not in log_file.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    lines = [json.loads(line) for line in log_file.read_text().splitlines() if line.startswith("{")]
    assert lines and all("request_id" in line and "level" in line and "message" in line for line in lines)
    access = [line for line in lines if line["logger"] == "conveyor.server.access"]
    assert {"trace-abc-123", rid} <= {line["request_id"] for line in access}
    mine = next(line for line in access if line["request_id"] == "trace-abc-123")
    assert mine["status"] == 200 and mine["method"] == "POST"
