"""Consuming: one worker process drains a backlog in batches of 100 with a no-op handler.

Conveyor: ``App.consumer(max_batch_size=100, max_batch_timeout=0)`` over a pre-filled queue, timed
from ``app.start()`` until every message is acked. The raw limit: the same rows in a plain indexed
table (WAL, synchronous=FULL), selected and deleted 100 at a time, one commit per batch. The two
take turns over 4 rounds of 25,000 messages.
"""

from __future__ import annotations

import time
from pathlib import Path

import conveyor
from harness import (
    arguments,
    body,
    emit,
    ratio,
    raw_connection,
    raw_insert_batch,
    raw_rows,
    scratch_directory,
    wait_until_handled,
)

BATCH = 100


def fill(q: conveyor.Queue, count: int) -> None:
    for start in range(0, count, BATCH):
        q.send_batch([{"body": body(i)} for i in range(start, min(count, start + BATCH))])


def consume_conveyor(directory: Path, count: int) -> float:
    """Seconds for one worker to handle ``count`` pre-filled messages in batches of 100."""
    cv = conveyor.connect(f"sqlite://{directory / 'conveyor'}")
    q = cv.create_queue("consume")
    fill(q, count)
    app = conveyor.App(cv)

    @app.consumer("consume", max_batch_size=BATCH, max_batch_timeout=0)
    def handle(batch: conveyor.MessageBatch) -> None:
        return None

    started = time.perf_counter()
    app.start()
    # Counted once each batch is settled (acked), not when its handler returns.
    wait_until_handled(app, "consume", count)
    seconds = time.perf_counter() - started
    app.stop()
    left = q.metrics().backlog_count
    cv.close()
    if left:
        raise RuntimeError(f"{left} messages were left in the queue")
    return seconds


def consume_raw(directory: Path, count: int) -> float:
    """Seconds to select and delete ``count`` rows, 100 per transaction."""
    conn = raw_connection(directory / "raw.db")
    for start in range(0, count, BATCH):
        raw_insert_batch(conn, raw_rows(start, min(BATCH, count - start)))
    taken = 0
    started = time.perf_counter()
    while True:
        conn.execute("BEGIN IMMEDIATE")
        rows = conn.execute(
            "SELECT seq, id, body FROM messages WHERE visible_at_ms <= ? ORDER BY visible_at_ms LIMIT ?",
            (time.time_ns() // 1_000_000, BATCH),
        ).fetchall()
        if not rows:
            conn.execute("COMMIT")
            break
        conn.executemany("DELETE FROM messages WHERE seq = ?", [(seq,) for seq, _, _ in rows])
        conn.execute("COMMIT")
        taken += len(rows)
    seconds = time.perf_counter() - started
    conn.close()
    if taken != count:
        raise RuntimeError(f"raw consume took {taken} of {count} rows")
    return seconds


def main() -> None:
    args = arguments(__doc__ or "")
    count = 5_000 if args.quick else 100_000
    # The disk's speed swings with the other tenants' load: the two take turns over a few rounds,
    # each on a fresh backlog of count / rounds messages (a round's worker start-up is timed too).
    rounds = 1 if args.quick else 4
    raw_seconds = conveyor_seconds = 0.0
    for r in range(rounds):
        with scratch_directory("consume") as directory:
            if r % 2:
                conveyor_seconds += consume_conveyor(directory, count // rounds)
                raw_seconds += consume_raw(directory, count // rounds)
            else:
                raw_seconds += consume_raw(directory, count // rounds)
                conveyor_seconds += consume_conveyor(directory, count // rounds)
    params = {"batch": BATCH, "body_bytes": 1024, "workers": 1, "rounds": rounds}
    emit("consume_throughput", count / conveyor_seconds, "msg/s", count, **params)
    emit("raw_sqlite_select_delete_throughput", count / raw_seconds, "msg/s", count, **params)
    ratio("consume_vs_raw_sqlite", raw_seconds, conveyor_seconds, count, target=0.4, **params)


if __name__ == "__main__":
    main()
