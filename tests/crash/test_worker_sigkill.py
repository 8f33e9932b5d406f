"""Workers killed with SIGKILL at random moments lose nothing, and deliver again only what was in
flight at a kill.

20,000 messages, numbered ``n``, go into a queue; two worker processes (``crash_worker.py``) consume
it while the test SIGKILLs one of them at a random moment and starts a replacement, again and again
while much of the backlog is left; a last worker then drains the queue, leases of killed workers
included (they run out after 2 s). Each handler wrote ``n attempts pid decision`` durably before
returning, so the audit sees every handling, and knows which processes were killed.
"""

from __future__ import annotations

import random
from pathlib import Path

import conveyor

from .crash_processes import Workers, unexplained_redeliveries

MESSAGES = 20_000
# Keep killing while at least this much backlog is left, so kills land in the middle of the work.
KILL_WHILE_BACKLOG_ABOVE = 1_500


def test_sigkilled_workers_lose_nothing_and_redeliver_only_work_in_flight(tmp_path: Path, rng: random.Random) -> None:
    data_dir = tmp_path / "data"
    workers = Workers(data_dir, tmp_path / "audit", tmp_path / "logs", policy="ack")
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        queue = cv.create_queue("work")
        for first in range(0, MESSAGES, 100):
            queue.send_batch([{"body": {"n": n}} for n in range(first, first + 100)])

        try:
            workers.kill_and_restart_while(queue, KILL_WHILE_BACKLOG_ABOVE, rng)
            assert workers.drain(timeout=90), f"the last worker did not drain the queue; see {workers.logs}"
        finally:
            workers.kill_all()

        handlings = workers.handlings()
        assert sorted({h.n for h in handlings}) == list(range(MESSAGES)), "messages lost (or unknown ones handled)"
        assert unexplained_redeliveries(handlings, workers.killed) == []
        counters = queue.counters()
        assert (counters.sent, counters.acked, counters.in_flight) == (MESSAGES, MESSAGES, 0)
        assert (counters.retried, counters.dead_lettered, counters.dropped) == (0, 0, 0)
        assert queue.metrics().backlog_count == 0

    killed_with_work = {h.pid for h in handlings} & workers.killed
    print(
        f"{len(workers.killed)} workers killed ({len(killed_with_work)} after handling messages), "
        f"{len(handlings) - MESSAGES} messages delivered again after a kill"
    )
    assert killed_with_work, "no worker was killed in the middle of its work: the test tested nothing"
