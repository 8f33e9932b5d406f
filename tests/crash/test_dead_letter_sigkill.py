"""Workers killed with SIGKILL at random moments while messages are retried and dead-lettered lose
nothing: every message ends acked or in the dead letter queue, and a copy to the dead letter queue
is never lost between the two shards (at worst it is made again, when a kill falls in between).

``crash_worker.py retry``: of messages ``n``, ``n % 3 == 0`` are acked, ``n % 3 == 1`` retried once
then acked, ``n % 3 == 2`` always retried, so after ``max_retries=1`` they go to ``work-dlq``. Kills
also use up deliveries, so any message may end in the dead letter queue; none may vanish.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import conveyor
from conveyor.codec import decode

from .crash_processes import Workers, unexplained_redeliveries

MESSAGES = 3_000
KILL_WHILE_BACKLOG_ABOVE = 300


def test_sigkilled_workers_lose_nothing_on_the_retry_and_dead_letter_path(tmp_path: Path, rng: random.Random) -> None:
    data_dir = tmp_path / "data"
    workers = Workers(data_dir, tmp_path / "audit", tmp_path / "logs", policy="retry")
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        queue = cv.create_queue("work")
        dlq = cv.create_queue("work-dlq")
        for first in range(0, MESSAGES, 100):
            queue.send_batch([{"body": {"n": n}} for n in range(first, first + 100)])

        try:
            workers.kill_and_restart_while(queue, KILL_WHILE_BACKLOG_ABOVE, rng)
            assert workers.drain(timeout=90), f"the last worker did not drain the queue; see {workers.logs}"
        finally:
            workers.kill_all()

        handlings = workers.handlings()
        dead = Counter(decode(m.body, m.content_type)["n"] for m in cv.engine.peek(dlq.id, 1_000_000))
        counters = queue.counters()
        assert queue.metrics().backlog_count == 0
        assert dlq.metrics().backlog_count == sum(dead.values())

    acked = {h.n for h in handlings if h.decision == "ack"}
    acked_for_good = {h.n for h in handlings if h.decision == "ack" and h.pid not in workers.killed}
    assert [n for n in range(MESSAGES) if n not in acked and n not in dead] == [], "messages lost"
    assert [n for n in range(2, MESSAGES, 3) if n not in dead] == [], "always-retried messages not dead-lettered"
    assert sorted(acked_for_good & set(dead)) == [], "messages dead-lettered after an ack that was committed"
    assert unexplained_redeliveries(handlings, workers.killed) == []
    # Each message left the queue exactly once: by its ack or by its move to the dead letter queue.
    assert (counters.acked + counters.dead_lettered, counters.dropped) == (MESSAGES, 0)
    assert counters.dead_lettered == len(dead)
    print(
        f"{len(workers.killed)} workers killed; {len(dead)} messages dead-lettered "
        f"({sum(dead.values()) - len(dead)} copied twice by a kill between copy and delete)"
    )
