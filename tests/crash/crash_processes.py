"""Worker processes for the crash tests: start them, SIGKILL them at random moments, read what
their handlers recorded."""

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
WORKERS_AT_ONCE = 2
MAX_KILLS = 60
FIRST_BATCH_TIMEOUT = 30.0
# A victim dies this long (at random) after it handled its first batch.
LIFETIME_SECONDS = (0.0, 0.3)


@dataclass(frozen=True, slots=True)
class Handling:
    """One handling of one message, as the handler recorded it before returning."""

    n: int
    attempts: int
    pid: int
    decision: str


class Workers:
    """The worker processes of one test; each writes ``AUDIT_DIR/PID.log``, its output goes to ``logs``."""

    def __init__(self, data_dir: Path, audit_dir: Path, logs: Path, policy: str) -> None:
        self.data_dir, self.audit_dir, self.logs, self.policy = data_dir, audit_dir, logs, policy
        self.alive: list[subprocess.Popen[bytes]] = []
        self.killed: set[int] = set()
        self.started = 0
        self._log: dict[int, Path] = {}
        audit_dir.mkdir(exist_ok=True)
        logs.mkdir(exist_ok=True)

    def start(self, mode: str = "run") -> subprocess.Popen[bytes]:
        self.started += 1
        log = self.logs / f"worker-{self.started}.log"
        with log.open("wb") as output:
            args = [sys.executable, str(WORKER), str(self.data_dir), str(self.audit_dir), self.policy, mode]
            process = subprocess.Popen(args, stdout=output, stderr=subprocess.STDOUT)
        self.alive.append(process)
        self._log[process.pid] = log
        return process

    def check_alive(self, process: subprocess.Popen[bytes]) -> None:
        """Fail the test if a worker died of itself: a crash must not pass for one of our kills."""
        if process.poll() is not None:
            self.alive.remove(process)
            output = self._log[process.pid].read_text()[-3000:]
            raise AssertionError(f"worker {process.pid} exited by itself ({process.returncode}):\n{output}")

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        process.send_signal(signal.SIGKILL)
        process.wait()
        self.alive.remove(process)
        self.killed.add(process.pid)

    def kill_all(self) -> None:
        for process in list(self.alive):
            self.kill(process)

    def started_work(self, process: subprocess.Popen[bytes], queue: conveyor.Queue, backlog_above: int) -> bool:
        """Wait until ``process`` handled its first batch (True) or the backlog fell to ``backlog_above``
        (False: the other workers took what was left)."""
        audit = self.audit_dir / f"{process.pid}.log"
        deadline = time.monotonic() + FIRST_BATCH_TIMEOUT
        while not (audit.exists() and audit.stat().st_size):
            self.check_alive(process)
            backlog = queue.metrics().backlog_count
            if backlog <= backlog_above:
                return False
            assert time.monotonic() < deadline, f"worker {process.pid} handled nothing in a backlog of {backlog}"
            time.sleep(0.01)
        return True

    def kill_and_restart_while(self, queue: conveyor.Queue, backlog_above: int, rng: random.Random) -> None:
        """Keep ``WORKERS_AT_ONCE`` workers busy, SIGKILLing the oldest at a random moment after its
        first batch and starting another, while ``queue`` holds more than ``backlog_above`` messages;
        then kill them all."""
        while len(self.alive) < WORKERS_AT_ONCE:
            self.start()
        while len(self.killed) < MAX_KILLS and self.started_work(self.alive[0], queue, backlog_above):
            time.sleep(rng.uniform(*LIFETIME_SECONDS))
            self.check_alive(self.alive[0])
            self.kill(self.alive[0])
            self.start()
        self.kill_all()

    def drain(self, timeout: float) -> bool:
        """Run a last worker until the queue is empty; True if it drained it."""
        last = self.start("drain")
        try:
            drained = last.wait(timeout=timeout) == 0
        except subprocess.TimeoutExpired:
            self.kill(last)
            return False
        self.alive.remove(last)  # it exited by itself: its handlings must be final ones
        return drained

    def handlings(self) -> list[Handling]:
        """Every handling recorded; a line cut short by a kill was not handled (its batch never returned)."""
        out = []
        for audit in self.audit_dir.glob("*.log"):
            for line in audit.read_text().splitlines(keepends=True):
                if line.endswith("\n"):
                    n, attempts, pid, decision = line.split()
                    out.append(Handling(int(n), int(attempts), int(pid), decision))
        return out


def unexplained_redeliveries(handlings: list[Handling], killed: set[int]) -> list[str]:
    """Deliveries the semantics do not allow: attempts that do not grow from one delivery of a
    message to the next, or a delivery after one its process acked and outlived (an ack that
    was committed). A delivery after an ack by a killed process is work that was in flight."""
    by_message: dict[int, list[Handling]] = defaultdict(list)
    for h in handlings:
        by_message[h.n].append(h)
    problems = []
    for n, seen in sorted(by_message.items()):
        seen.sort(key=lambda h: h.attempts)
        attempts = [h.attempts for h in seen]
        if attempts[0] < 1 or any(a >= b for a, b in itertools.pairwise(attempts)):
            problems.append(f"message {n}: attempts do not grow from delivery to delivery: {seen}")
        for earlier in seen[:-1]:
            if earlier.decision == "ack" and earlier.pid not in killed:
                problems.append(
                    f"message {n} delivered again after process {earlier.pid}, never killed, acked it: {seen}"
                )
    return problems
