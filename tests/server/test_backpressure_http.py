"""Back-pressure through the server's own routes: Cloudflare's push and bulk push (and its SDK), the
workerd binding, and ``conveyor serve``'s options and environment. A refused send answers 429 with
Cloudflare's code, ``retry-after`` in whole seconds and no ``x-should-retry: false`` (asking again
can help), and stores nothing."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from pathlib import Path

import cloudflare
import httpx
import pytest

import conveyor
from conveyor.server.testing import RunningServer, running_server

from .conftest import ACCOUNT, sdk
from .process import CONVEYOR, serve_process

BASE = f"/client/v4/accounts/{ACCOUNT}/queues"


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[RunningServer]:
    limits = conveyor.QueueLimits(max_send_rate=10, max_queue_bytes=10_000)
    with running_server(f"sqlite://{tmp_path / 'data'}", queue_limits=limits) as running:
        yield running


def _refusal(r: httpx.Response, code: int, error: str) -> None:
    assert r.status_code == 429, r.text
    assert r.json()["errors"][0]["code"] == code
    assert r.headers["conveyor-error"] == error
    assert r.headers["retry-after"].isdigit() and int(r.headers["retry-after"]) >= 1
    assert "x-should-retry" not in r.headers


def test_cloudflare_routes_answer_10250_past_the_rate_and_10251_past_the_size(limited: RunningServer) -> None:
    secret = limited.tokens.create(ACCOUNT)[0]
    auth = {"authorization": f"Bearer {secret}"}
    queue = limited.connect(ACCOUNT).create_queue("emails")
    # Larger than the bucket (10): taken when it is full, leaving 3 s of debt.
    batch = {"messages": [{"body": n} for n in range(40)]}
    assert httpx.post(f"{limited.url}{BASE}/{queue.id}/messages/batch", json=batch, headers=auth).status_code == 200
    one = httpx.post(f"{limited.url}{BASE}/{queue.id}/messages", json={"body": 1}, headers=auth)
    _refusal(one, 10250, "Overloaded")
    with sdk(limited, secret) as cf, pytest.raises(cloudflare.RateLimitError) as caught:
        cf.queues.messages.bulk_push(queue.id, account_id=ACCOUNT, messages=[{"body": 1}])
    assert caught.value.status_code == 429 and "over its send rate of 10 messages a second" in str(caught.value)

    big = limited.connect(ACCOUNT).create_queue("big")
    body = {"body": "x" * 9_000, "content_type": "text"}
    assert httpx.post(f"{limited.url}{BASE}/{big.id}/messages", json=body, headers=auth).status_code == 200
    full = httpx.post(f"{limited.url}{BASE}/{big.id}/messages", json=body, headers=auth)
    _refusal(full, 10251, "StorageLimitExceeded")
    assert "storage limit of 10000" in full.json()["errors"][0]["message"]
    assert queue.metrics().backlog_count == 40 and big.metrics().backlog_count == 1


def test_the_workerd_binding_answers_10250_with_its_headers(limited: RunningServer) -> None:
    secret = limited.tokens.create(ACCOUNT)[0]
    limited.connect(ACCOUNT).create_queue("from-worker")
    url = f"{limited.url}/workerd/accounts/{ACCOUNT}/queues/from-worker"
    headers = {"authorization": f"Bearer {secret}"}
    item = {"body": base64.b64encode(b'"x"').decode(), "contentType": "json"}
    assert httpx.post(url + "/batch", json={"messages": [item] * 40}, headers=headers).status_code == 200
    refused = httpx.post(url + "/batch", json={"messages": [item]}, headers=headers)
    _refusal(refused, 10250, "Overloaded")
    assert refused.headers["CF-Queues-Error-Code"] == "10250"
    assert httpx.get(url + "/metrics", headers=headers).json()["backlogCount"] == 40


def test_conveyor_serve_takes_its_limits_from_options_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONVEYOR_MAX_BACKLOG", "2")
    with (
        serve_process(tmp_path / "data", ACCOUNT, "--max-send-rate", "1") as proc,
        conveyor.connect(proc.url, token=proc.token, account_id=ACCOUNT) as cv,
    ):
        q = cv.create_queue("q")
        q.send_batch([{"body": 1}, {"body": 2}])  # larger than the bucket (1): taken when it is full
        with pytest.raises(conveyor.StorageLimitExceeded, match="backlog limit of 2") as full:
            q.send(3)
        assert full.value.retry_after == 1.0
        other = cv.create_queue("other")
        other.send(1)
        with pytest.raises(conveyor.Overloaded, match="send rate of 1 messages a second") as fast:
            other.send(2)
        assert fast.value.retry_after is not None and fast.value.retry_after >= 1
        assert q.metrics().backlog_count == 2 and other.metrics().backlog_count == 1


def test_conveyor_serve_documents_its_limits_and_refuses_a_bad_one() -> None:
    shown = subprocess.run([CONVEYOR, "serve", "--help"], capture_output=True, text=True, check=True).stdout
    for option in ("--max-send-rate", "--max-backlog", "--max-queue-bytes", "CONVEYOR_MAX_SEND_RATE"):
        assert option in shown
    bad = subprocess.run([CONVEYOR, "serve", "--max-send-rate", "0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--max-send-rate" in bad.stderr
