"""The worker registry over a real ``conveyor serve``: a remote worker and the server's own worker
register themselves; an account sees only entries for its own queues, a read-only token lists but
cannot register, a queue-scoped token sees its queues only, and no account can touch another's."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import httpx

import conveyor

from .process import CONVEYOR, ServeProcess, create_token, serve_process
from .test_serve_workers import _code, _queue_with_consumer

WORKERS = "/conveyor/v1/accounts/{account}/workers"


def _get(proc: ServeProcess, token: str, account: str = "acc1") -> httpx.Response:
    return httpx.get(proc.url + WORKERS.format(account=account), headers={"authorization": f"Bearer {token}"})


def _put(proc: ServeProcess, token: str, worker_id: str, body: object, account: str = "acc1") -> httpx.Response:
    url = f"{proc.url}{WORKERS.format(account=account)}/{worker_id}"
    return httpx.put(url, json=body, headers={"authorization": f"Bearer {token}"})


def _runs(answer: httpx.Response) -> set[tuple[str, str]]:
    assert answer.status_code == 200, answer.text
    return {(r["queue_name"], r["script_name"]) for w in answer.json()["result"] for r in w["runs"]}


def handle_jobs(batch: conveyor.MessageBatch) -> None:
    pass


def test_workers_register_and_each_token_sees_only_its_own(tmp_path: Path) -> None:
    code = _code(tmp_path)
    data = tmp_path / "data"
    with serve_process(data, "acc1", "--handlers", "served", cwd=code) as proc:
        read_only = create_token(data, "acc1", "--read-only")
        scoped = create_token(data, "acc1", "--queue", "orphan")
        other = create_token(data, "acc2")
        _queue_with_consumer(proc, "served-q", "served:handle")
        _queue_with_consumer(proc, "orphan", "nobody:handle")
        cv = conveyor.connect(proc.url, token=proc.token, account_id="acc1")
        jobs = cv.create_queue("jobs")
        app = conveyor.App(cv)
        app.consumer("jobs")(handle_jobs)
        app.start()
        try:
            deadline = time.monotonic() + 20
            expected = {("jobs", f"{__name__}:handle_jobs"), ("served-q", "served:handle")}
            while _runs(_get(proc, proc.token)) != expected:
                assert time.monotonic() < deadline, _get(proc, proc.token).text
                time.sleep(0.2)
            remote_id = app.worker_id
            assert remote_id is not None
            assert _runs(_get(proc, read_only)) == expected
            assert _runs(_get(proc, scoped)) == set()
            # Another account sees nothing, cannot claim a queue of acc1, nor take over acc1's worker.
            assert _runs(_get(proc, other, "acc2")) == set()
            assert _get(proc, other, "acc1").status_code == 403
            body = {"host": "h", "pid": 1, "started_ms": 1, "runs": [{"queue_id": jobs.id, "script_name": "x:y"}]}
            assert _put(proc, other, "d" * 32, body, "acc2").status_code == 404
            hijack = _put(proc, other, remote_id, {"host": "h", "pid": 1, "started_ms": 1, "runs": []}, "acc2")
            assert hijack.status_code == 400 and "taken" in hijack.text
            headers = {"authorization": f"Bearer {other}"}
            httpx.delete(f"{proc.url}{WORKERS.format(account='acc2')}/{remote_id}", headers=headers)
            assert _runs(_get(proc, proc.token)) == expected
            # A read-only token lists but cannot register; unknown fields are refused by name.
            assert _put(proc, read_only, "e" * 32, {"host": "h", "pid": 1, "started_ms": 1}).status_code == 403
            unknown = _put(proc, proc.token, "e" * 32, {"host": "h", "pid": 1, "started_ms": 1, "colour": "red"})
            assert unknown.status_code == 400 and "colour" in unknown.text

            listed = subprocess.run(
                [
                    CONVEYOR,
                    "--url",
                    proc.url,
                    "--token",
                    proc.token,
                    "--account-id",
                    "acc1",
                    "workers",
                    "list",
                    "--json",
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            document = json.loads(listed)
            listed_runs = {
                (r["account_id"], r["queue_name"], r["script_name"]) for w in document["workers"] for r in w["runs"]
            }
            assert listed_runs == {("acc1", *run) for run in expected}
            assert [(m["queue_name"], m["script_name"], m["status"]) for m in document["no_worker"]] == [
                ("orphan", "nobody:handle", "no worker for this script")
            ]
        finally:
            app.stop()
        assert _runs(_get(proc, proc.token)) == {("served-q", "served:handle")}
        cv.close()
