"""Concurrent stores to one shard that share a commit are stored by one call (the group committer's
batched operations): every message exactly once, each with its own delay, and metrics that count
them all."""

from __future__ import annotations

import threading
from pathlib import Path

import conveyor


def test_concurrent_sends_and_batches_with_their_own_delays(data_dir: Path) -> None:
    cv = conveyor.connect(f"sqlite://{data_dir}")
    q = cv.create_queue("grouped")
    q.add_pull_consumer(batch_size=100)
    errors: list[BaseException] = []

    def producer(k: int) -> None:
        try:
            for i in range(40):
                if i % 10 == 0:
                    q.send_batch([{"body": {"k": k, "i": i, "j": j}, "delay_seconds": j % 2 * 3600} for j in range(5)])
                else:
                    q.send({"k": k, "i": i}, delay_seconds=3600 if i % 2 else None)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=producer, args=(k,)) for k in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    committer = cv.engine.deployment_engine().home_shard(q.id).committer  # type: ignore[union-attr]
    assert committer.operations > committer.commits, "no commit carried two stores"
    # Per producer: 36 single sends (the 20 odd ones delayed) and 4 batches of 5 (2 of each delayed).
    assert q.metrics().backlog_count == 32 * (36 + 20)
    visible: list[dict[str, int]] = []
    while pulled := q.pull(batch_size=100):
        visible.extend(m.body for m in pulled)
        q.ack(acks=[m.lease_id for m in pulled])
    keys = [(b["k"], b["i"], b.get("j")) for b in visible]
    assert len(keys) == len(set(keys)) == 32 * (16 + 4 * 3)
    assert all(b.get("j", 0) % 2 == 0 for b in visible)
    assert all(b["i"] % 2 == 0 or b["i"] % 10 == 0 for b in visible if "j" not in b)
    cv.close()
