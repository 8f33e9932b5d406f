"""A worker machine of the simulation: ``conveyor.App`` on PostgreSQL, recording what it handles.

Usage: ``sim_worker.py URL AUDIT_DIR``. It consumes account ``sim``'s queue ``jobs`` (stored as
``sim/jobs``, the name the HTTP servers use) and appends each handled message's key to
``AUDIT_DIR/handled-PID.log``, flushed to disk, before the batch is acked.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import conveyor
from conveyor.engine.postgres import PostgresEngine
from conveyor.server.accounts import AccountEngine

ACCOUNT, QUEUE = "sim", "jobs"
VISIBILITY_TIMEOUT_MS = 3000


def main() -> None:
    url, audit_dir = sys.argv[1:3]
    audit = os.open(Path(audit_dir) / f"handled-{os.getpid()}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    app = conveyor.App(conveyor.Conveyor(AccountEngine(PostgresEngine(url), ACCOUNT), url), grace_period=5.0)

    @app.consumer(
        QUEUE,
        max_batch_size=50,
        max_batch_timeout=0.05,
        max_concurrency=4,
        max_retries=100,
        visibility_timeout_ms=VISIBILITY_TIMEOUT_MS,
    )
    def handle(batch: conveyor.MessageBatch) -> None:
        os.write(audit, "".join(f"{m.body['k']}\n" for m in batch.messages).encode())
        os.fsync(audit)

    app.run()


if __name__ == "__main__":
    main()
