"""A worker process for the crash tests: a ``conveyor.App`` whose handler records each message it
handles durably (a line ``n attempts pid decision``, written and fsynced) before it returns.

Usage: ``crash_worker.py DATA_DIR AUDIT_DIR ack|retry run|drain``. The consumer of queue ``work``:

- ``ack``: every message is acked.
- ``retry``: message ``n`` is acked if ``n % 3 == 0``, retried once then acked if ``n % 3 == 1``,
  always retried if ``n % 3 == 2``; with ``max_retries=1`` those go to queue ``work-dlq``.

``run`` delivers until killed; ``drain`` delivers until nothing is left (leases of killed workers
included), then exits 0.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import conveyor
from conveyor import limits

QUEUE = "work"
DEAD_LETTER_QUEUE = "work-dlq"
VISIBILITY_TIMEOUT_MS = 2000
HANDLER_SECONDS = 0.03
CONCURRENCY = 2


def decide(m: conveyor.Message, policy: str) -> str:
    n = m.body["n"]
    if policy == "ack" or n % 3 == 0 or (n % 3 == 1 and m.attempts > 1):
        m.ack()
        return "ack"
    m.retry()
    return "retry"


def main() -> None:
    data_dir, audit_dir, policy, mode = sys.argv[1:5]
    pid = os.getpid()
    # O_APPEND: each handler's lines go out in one write, whole, whatever threads run at once.
    audit = os.open(Path(audit_dir) / f"{pid}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    app = conveyor.App(f"sqlite://{data_dir}", grace_period=5.0)

    @app.consumer(
        QUEUE,
        max_batch_size=50,
        max_batch_timeout=0.05,
        max_retries=limits.MAX_RETRIES if policy == "ack" else 1,
        dead_letter_queue=None if policy == "ack" else DEAD_LETTER_QUEUE,
        max_concurrency=CONCURRENCY,
        visibility_timeout_ms=VISIBILITY_TIMEOUT_MS,
    )
    def handle(batch: conveyor.MessageBatch) -> None:
        lines = "".join(f"{m.body['n']} {m.attempts} {pid} {decide(m, policy)}\n" for m in batch.messages)
        os.write(audit, lines.encode())
        os.fsync(audit)
        # The work itself: a kill now leaves the batch handled but not settled, the case that may
        # (and must only then) be delivered again.
        time.sleep(HANDLER_SECONDS)

    if mode == "drain":
        sys.exit(0 if app.drain(timeout=60.0) else 1)
    app.run()


if __name__ == "__main__":
    main()
