"""``conveyor serve`` and ``conveyor tokens`` as a user runs them."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest

import conveyor

from .process import CONVEYOR, create_token, serve_process


def _tokens(data: Path, *args: str) -> str:
    return subprocess.run(
        [CONVEYOR, "--url", f"sqlite://{data}", "tokens", *args], check=True, capture_output=True, text=True
    ).stdout


def test_tokens_create_prints_the_secret_alone_on_the_last_line_then_list_and_revoke(tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = _tokens(data, "create", "--account", "acc1", "--read-only", "--queue", "emails", "--queue", "jobs")
    secret = out.strip().splitlines()[-1]
    assert secret.startswith("cvt_") and " " not in secret
    listed = _tokens(data, "list")
    assert "acc1" in listed and "emails,jobs" in listed and secret not in listed
    token_id = listed.split()[0]
    assert "revoked" in _tokens(data, "revoke", token_id)
    assert _tokens(data, "list").strip() == ""


def test_serve_with_worker_runs_registered_push_consumers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    handlers = tmp_path / "handlers"
    handlers.mkdir()
    done = tmp_path / "handled.txt"
    (handlers / "served_handlers.py").write_text(
        "from pathlib import Path\n"
        f"OUT = Path({str(done)!r})\n"
        "def handle(batch):\n"
        "    with OUT.open('a') as f:\n"
        "        for m in batch.messages:\n"
        "            f.write(str(m.body['n']) + '\\n')\n"
    )
    data = tmp_path / "data"
    token = create_token(data, "acc1")
    headers = {"authorization": f"Bearer {token}"}
    base = "/client/v4/accounts/acc1/queues"

    # Register the push consumer first, through the API, with the server that has no worker.
    with serve_process(data, "acc1") as proc:
        qid = httpx.post(proc.url + base, json={"queue_name": "jobs"}, headers=headers).json()["result"]["queue_id"]
        consumer = {"type": "worker", "script_name": "served_handlers:handle", "settings": {"max_wait_time_ms": 50}}
        assert httpx.post(f"{proc.url}{base}/{qid}/consumers", json=consumer, headers=headers).status_code == 200
        batch = {"messages": [{"body": {"n": i}} for i in range(5)]}
        httpx.post(f"{proc.url}{base}/{qid}/messages/batch", json=batch, headers=headers)

    monkeypatch.setenv("PYTHONPATH", f"{handlers}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    with serve_process(data, "acc1", "--handlers", "served_handlers") as proc:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            metrics = httpx.get(f"{proc.url}{base}/{qid}/metrics", headers=headers).json()["result"]
            if metrics["backlog_count"] == 0:
                break
            time.sleep(0.1)
    assert sorted(int(n) for n in done.read_text().split()) == [0, 1, 2, 3, 4]


def test_no_auth_off_loopback_is_refused_and_on_loopback_warns_loudly(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'data'}"
    refused = subprocess.run(
        [CONVEYOR, "--url", url, "serve", "--no-auth", "--host", "0.0.0.0"], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode != 0 and "loopback" in refused.stdout + refused.stderr
    with serve_process(tmp_path / "data", "acc1", "--no-auth") as proc:
        r = httpx.post(f"{proc.url}/client/v4/accounts/anyone/queues", json={"queue_name": "open"})
        assert r.status_code == 200
    log = next(tmp_path.glob("serve-*.log")).read_text()
    assert "WARNING: --no-auth" in log and "AUTHENTICATION IS OFF" in log


def test_worker_starts_consumers_registered_later_and_stops_removed_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "later_handlers.py").write_text(
        "SEEN = []\ndef handle(batch):\n    SEEN.extend(m.body for m in batch.messages)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import later_handlers  # type: ignore[import-not-found]

    from conveyor.client.connect import open_engine
    from conveyor.server.push_workers import HandlerSources, Workers

    url = f"sqlite://{tmp_path / 'data'}"
    with contextlib.closing(open_engine(url)) as engine, conveyor.connect(url, account_id="acc1") as acc:
        # as conveyor serve has it: the raw engine, every account's queues
        workers = Workers(engine, HandlerSources(modules=("later_handlers",)))
        workers.refresh()
        assert workers.apps == {}
        q = acc.create_queue("later")
        consumer = q.add_consumer(
            "worker", script_name="later_handlers:handle", settings=conveyor.ConsumerSettings(max_wait_time_ms=50)
        )
        q.send_batch([{"body": i} for i in range(3)])
        workers.refresh()
        try:
            assert list(workers.apps) == [("acc1", "later")]
            deadline = time.monotonic() + 20
            while len(later_handlers.SEEN) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert sorted(later_handlers.SEEN) == [0, 1, 2]
            acc.engine.remove_consumer(consumer.consumer_id)
            workers.refresh()
            assert workers.apps == {}
        finally:
            workers.stop()
