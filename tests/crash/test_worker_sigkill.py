"""Workers killed with SIGKILL at random moments lose nothing, and deliver again only what was in
flight at a kill.

20,000 messages, numbered ``n``, go into a queue; two worker processes (``crash_worker.py``) consume
it while the test SIGKILLs one of them at a random moment and starts a replacement, again and again
while much of the backlog is left; a last worker then drains the queue, leases of killed workers
included (they run out after 2 s). Each handler wrote ``n attempts pid`` durably before returning,
so the audit sees every handling, and knows which processes were killed.
"""

from __future__ import annotations

import itertools
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import conveyor

WORKER = Path(__file__).with_name("crash_worker.py")
MESSAGES = 20_000
WORKERS_AT_ONCE = 2
# Keep killing while at least this much backlog is left, so kills land in the middle of the work.
KILL_WHILE_BACKLOG_ABOVE = 1_500
MAX_KILLS = 60
# A victim dies this long (at random) after it handled its first batch.
LIFETIME_SECONDS = (0.0, 0.3)


@dataclass(frozen=True, slots=True)
class Handling:
    n: int
    attempts: int
    pid: int


class Workers:
    """Worker processes of one test, each with its audit file and its output kept for failures."""

    def __init__(self, data_dir: Path, audit_dir: Path, logs: Path) -> None:
        self.data_dir, self.audit_dir, self.logs = data_dir, audit_dir, logs
        self.alive: list[subprocess.Popen[bytes]] = []
        self.killed: set[int] = set()

    def start(self, mode: str = "run") -> subprocess.Popen[bytes]:
        log = (self.logs / f"worker-{len(self.killed)}-{len(self.alive)}-{time.monotonic_ns()}.log").open("wb")
        args = [sys.executable, str(WORKER), str(self.data_dir), "work", str(self.audit_dir), mode]
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.alive.append(process)
        return process

    def kill_after_first_batch(self, process: subprocess.Popen[bytes], rng: random.Random) -> None:
        audit = self.audit_dir / f"{process.pid}.log"
        deadline = time.monotonic() + 30
        while not (audit.exists() and audit.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(*LIFETIME_SECONDS))
        process.send_signal(signal.SIGKILL)
        process.wait()
        self.alive.remove(process)
        self.killed.add(process.pid)

    def kill_all(self) -> None:
        for process in self.alive:
            process.send_signal(signal.SIGKILL)
            process.wait()
            self.killed.add(process.pid)
        self.alive.clear()


def read_handlings(audit_dir: Path) -> list[Handling]:
    """Every handling recorded; a line cut short by a kill was not handled (its batch never returned)."""
    handlings = []
    for audit in audit_dir.glob("*.log"):
        for line in audit.read_text().splitlines(keepends=True):
            if line.endswith("\n"):
                n, attempts, pid = (int(field) for field in line.split())
                handlings.append(Handling(n, attempts, pid))
    return handlings


def audit(handlings: list[Handling], killed: set[int]) -> list[str]:
    """What went wrong: messages never handled, duplicates not explained by a kill."""
    by_message: dict[int, list[Handling]] = defaultdict(list)
    for h in handlings:
        by_message[h.n].append(h)
    problems = [f"message {n} was never handled" for n in range(MESSAGES) if n not in by_message]
    problems += [f"unknown message {n} was handled" for n in by_message if not 0 <= n < MESSAGES]
    for n, seen in by_message.items():
        seen.sort(key=lambda h: h.attempts)
        attempts = [h.attempts for h in seen]
        if attempts[0] < 1 or any(a >= b for a, b in itertools.pairwise(attempts)):
            problems.append(f"message {n}: attempts do not grow from delivery to delivery: {seen}")
        for earlier in seen[:-1]:
            if earlier.pid not in killed:
                problems.append(f"message {n} handled again after process {earlier.pid}, never killed, did: {seen}")
    return problems


def test_sigkilled_workers_lose_nothing_and_redeliver_only_work_in_flight(tmp_path: Path) -> None:
    data_dir, audit_dir, logs = tmp_path / "data", tmp_path / "audit", tmp_path / "logs"
    audit_dir.mkdir()
    logs.mkdir()
    rng = random.Random()
    with conveyor.connect(f"sqlite://{data_dir}") as cv:
        queue = cv.create_queue("work")
        for first in range(0, MESSAGES, 100):
            queue.send_batch([{"body": {"n": n}} for n in range(first, first + 100)])

        workers = Workers(data_dir, audit_dir, logs)
        try:
            for _ in range(WORKERS_AT_ONCE):
                workers.start()
            while queue.metrics().backlog_count > KILL_WHILE_BACKLOG_ABOVE and len(workers.killed) < MAX_KILLS:
                workers.kill_after_first_batch(workers.alive[0], rng)
                workers.start()
            workers.kill_all()
            last = workers.start("drain")
            drained = last.wait(timeout=90) == 0
            workers.alive.remove(last)  # it exited by itself: its handlings must be final ones
            assert drained, f"the last worker did not drain the queue; see {logs}"
        finally:
            workers.kill_all()

        handlings = read_handlings(audit_dir)
        assert audit(handlings, workers.killed) == []
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
