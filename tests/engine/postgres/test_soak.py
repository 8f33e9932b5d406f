"""The 1,000,000-message soak: no table bloat over a long run (``pytest -m soak -s tests/engine/postgres``).

A producer thread sends batches of 100 while a worker (``App``, with its coordinator, which vacuums)
consumes them, until a million messages went through. Every two seconds the test samples the
message partitions' dead rows and size. Dead rows must stay bounded (a few seconds of traffic, not
two per message sent) and the table must stop growing: its size at the end is what a few seconds of
backlog occupy, not a million messages' worth.
"""

from __future__ import annotations

import json
import threading
import time

import psycopg
import pytest

import conveyor

TOTAL = 1_000_000
BATCH = 100
BACKLOG_CAP = 20_000
BODY = b"x" * 100


def sample(url: str) -> dict[str, int]:
    """Live rows, dead rows and bytes (heap, indexes, TOAST) of every message partition, summed:
    the coordinator may split the queue into more shards under this load."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*), sum(n_live_tup), sum(n_dead_tup), sum(pg_total_relation_size(relid)) "
            "FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname LIKE 'messages%%'"
        ).fetchone()
    assert row is not None
    return {"partitions": int(row[0]), "live": int(row[1]), "dead": int(row[2]), "bytes": int(row[3])}


@pytest.mark.soak
@pytest.mark.timeout(1800)
def test_a_million_messages_leave_dead_rows_bounded_and_the_table_small(pg_url: str) -> None:
    producer_client = conveyor.connect(pg_url)
    q = producer_client.create_queue("soak")
    worker_client = conveyor.connect(pg_url)
    app = conveyor.App(worker_client)

    @app.consumer("soak", max_batch_size=BATCH, max_batch_timeout=0)
    def handle(batch: conveyor.MessageBatch) -> None:
        batch.ack_all()

    samples: list[dict[str, int]] = []
    stop = threading.Event()

    def produce() -> None:
        sent = 0
        while sent < TOTAL:
            if q.metrics().backlog_count > BACKLOG_CAP:
                time.sleep(0.01)
                continue
            q.send_batch([{"body": BODY, "content_type": "bytes"}] * BATCH)
            sent += BATCH

    def watch() -> None:
        while not stop.wait(2.0):
            samples.append(
                {
                    "t": round(time.monotonic() - started),
                    "handled": app.dispatchers["soak"].handled,
                    **sample(pg_url),
                }
            )

    started = time.monotonic()
    app.start()
    threads = [threading.Thread(target=produce), threading.Thread(target=watch)]
    for t in threads:
        t.start()
    try:
        threads[0].join()
        while app.dispatchers["soak"].handled < TOTAL:
            time.sleep(0.1)
    finally:
        stop.set()
        threads[1].join()
        app.stop()
    elapsed = time.monotonic() - started
    counters = q.counters()
    final = sample(pg_url)
    report = {
        "messages": TOTAL,
        "seconds": round(elapsed, 1),
        "msg_per_s": round(TOTAL / elapsed),
        "max_dead_rows": max(s["dead"] for s in samples),
        "max_table_bytes": max(s["bytes"] for s in samples),
        "final": final,
        "vacuums": worker_client.engine.deployment_engine().vacuumer.vacuums,  # type: ignore[union-attr]
        "samples": samples,
    }
    print(json.dumps(report))
    producer_client.close()
    worker_client.close()
    assert counters.sent == TOTAL and counters.acked == TOTAL
    # Without vacuuming, every message leaves two dead rows: 2,000,000 here.
    assert report["max_dead_rows"] < 300_000
    # A million 100-byte messages take about 200 MB of heap and index; a bounded backlog, a few MB.
    assert report["max_table_bytes"] < 100 * 1024 * 1024
