"""A producer machine of the simulation, sending through PostgreSQL directly or through the servers.

Usage: ``sim_producer.py NAME COUNT AUDIT_DIR (postgresql://... | http://A,http://B)``. It sends
COUNT messages ``{"k": "NAME-i"}`` in batches of 10 to account ``sim``'s queue ``jobs``; over HTTP,
batches take turns between the servers (a client-side round-robin load balancer). A batch that
raised is sent again (to the next server), so it may be stored twice; once a send returns, its keys
are appended to ``AUDIT_DIR/acked-NAME.log`` and flushed: those are the acknowledged sends the audit
holds the workers to.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from pathlib import Path

import conveyor
from conveyor.engine.postgres import PostgresEngine
from conveyor.server.accounts import AccountEngine

ACCOUNT, QUEUE = "sim", "jobs"
BATCH = 10


def clients(target: str) -> itertools.cycle[conveyor.Conveyor]:
    if target.startswith("postgresql://"):
        return itertools.cycle([conveyor.Conveyor(AccountEngine(PostgresEngine(target), ACCOUNT), target)])
    return itertools.cycle([conveyor.connect(url, token="none", account_id=ACCOUNT) for url in target.split(",")])


def main() -> None:
    name, count, audit_dir, target = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    audit = os.open(Path(audit_dir) / f"acked-{name}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    pool = clients(target)
    for start in range(0, count, BATCH):
        keys = [f"{name}-{i}" for i in range(start, min(count, start + BATCH))]
        client = next(pool)
        while True:
            try:
                client.queue(QUEUE).send_batch([{"body": {"k": k}} for k in keys])
                break
            except Exception as exc:  # a server killed or restarting, PostgreSQL restarting: try again
                print(f"{name}: send failed ({type(exc).__name__}: {exc}); retrying", file=sys.stderr, flush=True)
                client = next(pool)
                time.sleep(0.2)
        os.write(audit, "".join(f"{k}\n" for k in keys).encode())
        os.fsync(audit)
        time.sleep(0.005)


if __name__ == "__main__":
    main()
