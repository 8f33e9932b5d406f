"""An idle remote worker long-polls the engine lease route: one held request instead of a poll loop,
woken by a send, ended at once when the worker stops, and held without a thread per request."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

import conveyor
from conveyor.server.testing import RunningServer

CONVEYOR = str(Path(sys.executable).with_name("conveyor"))
APP = (
    "from pathlib import Path\n"
    "import conveyor\n"
    "app = conveyor.App()\n"
    "@app.consumer('idle', max_batch_timeout=0)\n"
    "def handle(batch):\n"
    "    Path(__file__).with_name('handled').write_text(batch.messages[0].body)\n"
)


def _requests(server: RunningServer) -> float:
    """Requests the server has answered so far (every route, every status)."""
    return sum(
        sample.value
        for metric in server.service.requests.registry.collect()
        for sample in metric.samples
        if sample.name.endswith("_count")
    )


def test_idle_remote_worker_holds_one_request_wakes_on_send_and_stops_at_once(
    server: RunningServer, tmp_path: Path
) -> None:
    secret = server.tokens.create("acc1")[0]
    q = server.connect("acc1").create_queue("idle")
    (tmp_path / "idle_app.py").write_text(APP)
    worker = subprocess.Popen(
        [CONVEYOR, "--url", server.url, "--token", secret, "--account-id", "acc1", "worker", "idle_app:app"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while q.consumer() is None:
            assert time.monotonic() < deadline and worker.poll() is None
            time.sleep(0.1)
        time.sleep(1.0)  # started and settled into its idle loop
        before = _requests(server)
        time.sleep(6.0)
        idle_requests = _requests(server) - before
        assert idle_requests <= 6, f"{idle_requests} requests in 6 s of idleness"  # a short poll made ~30

        sent = time.monotonic()
        q.send("wake up", content_type="text")
        while not (tmp_path / "handled").exists():
            assert time.monotonic() - sent < 5
            time.sleep(0.02)
        assert time.monotonic() - sent < 2.0  # the send woke the held lease: no waiting out a poll
        assert (tmp_path / "handled").read_text() == "wake up"

        time.sleep(1.0)  # idle again, its lease held
        stopping = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        worker.wait(15)
        assert time.monotonic() - stopping < 5.0  # its own held lease ended on its wake, not after 20 s
    finally:
        if worker.poll() is None:
            worker.kill()
        stderr = worker.communicate()[1]
    assert worker.returncode == 0, stderr
    assert "HTTP Request" not in stderr  # httpx's per-request INFO lines stay quiet


def test_hundreds_of_held_leases_take_no_thread_each_and_a_send_wakes_one(server: RunningServer) -> None:
    secret = server.tokens.create("acc1")[0]
    q = server.connect("acc1").create_queue("crowd")
    path = f"{server.url}/conveyor/v1/accounts/acc1/queues/{q.id}/lease"
    observed: list[int] = []

    async def crowd() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=300)
        async with httpx.AsyncClient(headers={"authorization": f"Bearer {secret}"}, limits=limits) as client:
            # The same crowd unheld first: the server's thread pool grows to its size for the leases.
            await asyncio.gather(*(client.post(path, json={"max_messages": 1}, timeout=30) for _ in range(200)))
            observed.append(threading.active_count())
            body = {"max_messages": 1, "wait_ms": 5000}
            held = [asyncio.create_task(client.post(path, json=body, timeout=30)) for _ in range(200)]
            await asyncio.sleep(2.0)
            observed.append(threading.active_count())
            sent = time.monotonic()
            await asyncio.to_thread(q.send, "one", content_type="text")
            first = await next(asyncio.as_completed(held))
            observed.append(int((time.monotonic() - sent) * 1000))
            return [first, *await asyncio.gather(*held)]

    answers = asyncio.run(crowd())
    threads_before, threads_held, woke_ms = observed
    assert threads_held - threads_before < 20, f"{threads_held - threads_before} threads for 200 held leases"
    assert woke_ms < 1500
    delivered = [m for r in answers[1:] for m in r.json()["result"]["messages"]]
    assert len(delivered) == 1 and answers[0].json()["result"]["messages"]
    assert all(r.status_code == 200 for r in answers)


def test_cloudflare_pull_stays_a_short_poll(server: RunningServer) -> None:
    cv = server.connect("acc1")
    q = cv.create_queue("pulled")
    q.add_pull_consumer()
    started = time.monotonic()
    assert q.pull(batch_size=5) == []
    assert time.monotonic() - started < 1.0


def test_remote_worker_of_a_paused_queue_looks_at_its_pause_flag_every_two_seconds(server: RunningServer) -> None:
    cv = server.connect("acc1")
    q = cv.create_queue("paused")
    q.pause_delivery()
    q.send("later", content_type="text")
    seen: list[str] = []
    app = conveyor.App(cv)
    app.consumer("paused", max_batch_timeout=0)(lambda batch: seen.extend(m.body for m in batch.messages))
    app.start()
    try:
        time.sleep(1.0)
        before = _requests(server)
        time.sleep(4.0)
        paused_requests = _requests(server) - before
        assert paused_requests <= 8, f"{paused_requests} requests in 4 s on a paused queue"  # was ~40
        assert seen == []
        q.resume_delivery()
        deadline = time.monotonic() + 5
        while not seen:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert seen == ["later"]
    finally:
        app.stop()
