"""A real ``conveyor serve`` over a deployment with one corrupt shard: it starts, lists the damaged
queue with its error, serves the other queues, and its maintenance reports the damaged queue once
per service instead of a traceback every few seconds."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx

from conveyor.engine.sqlite import SQLiteEngine
from conveyor.model import NewMessage, QueueSettings

from .process import serve_process

# Two shard-split rounds (every 5 s) after the first.
ROUNDS_SECONDS = 11.0


def test_serve_reports_a_damaged_queue_once_and_serves_the_others(tmp_path: Path) -> None:
    data = tmp_path / "data"
    engine = SQLiteEngine(data)
    ids = {}
    for name in ("kept", "victim"):
        ids[name] = engine.create_queue(f"acc1/{name}", QueueSettings()).queue_id
        engine.enqueue(ids[name], [NewMessage(b'{"n": 1}', "json", None)] * 5)
    engine.close()
    shard = data / "shards" / f"{ids['victim']}.0.db"
    shard.write_bytes(os.urandom(100) + shard.read_bytes()[100:])

    with serve_process(data, "acc1") as serve:
        headers = {"Authorization": f"Bearer {serve.token}"}
        queues = f"{serve.url}/client/v4/accounts/acc1/queues"
        listed = httpx.get(queues, headers=headers)
        assert listed.status_code == 200, listed.text
        errors = {q["queue_name"]: q.get("storage_error") for q in listed.json()["result"]}
        assert errors["kept"] is None and "is corrupt or not a database" in errors["victim"]
        kept = httpx.get(f"{queues}/{ids['kept']}/metrics", headers=headers)
        assert kept.status_code == 200 and kept.json()["result"]["backlog_count"] == 5
        time.sleep(ROUNDS_SECONDS)
        log = (data.parent / f"serve-{serve.url.rsplit(':', 1)[1]}.log").read_text()

    reports = [line for line in log.splitlines() if "skips queue acc1/victim" in line]
    assert len(reports) == 3, log  # retention expiry, shard split and the queue history, once each
    assert "Traceback" not in log, log
