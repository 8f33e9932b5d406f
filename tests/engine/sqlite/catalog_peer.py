"""Another process on the same data directory, driven one command per stdin line.

Usage: ``python catalog_peer.py DATA_DIR QUEUE``. It opens the deployment and the queue once and keeps
them for its whole life (never reopening), then answers each command with one JSON line:

- ``send``: send one message; answers ``"sent"``
- ``settings``: the queue's settings as the engine reads them on every send and dispatcher loop
- ``lease``: lease up to 100 messages; answers how many it got
- ``ack N``: lease up to N messages and ack them; answers how many it acked
- ``die-after-commit DELAY``: update the queue's delivery_delay, then die (SIGKILL) before publishing
  the catalog snapshot, as a process killed between the two would
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys

import conveyor
from conveyor.engine.sqlite.snapshot_store import SnapshotStore
from conveyor.model import DeliveryPolicy


def main() -> None:
    directory, name = sys.argv[1], sys.argv[2]
    cv = conveyor.connect(f"sqlite://{directory}")
    queue = cv.queue(name)
    print(json.dumps("ready"), flush=True)
    for line in sys.stdin:
        command, *args = line.split()
        answer: object
        if command == "send":
            queue.send({"from": "peer"})
            answer = "sent"
        elif command == "settings":
            answer = dataclasses.asdict(cv.engine.queue_settings(queue.id))
        elif command == "lease":
            answer = len(cv.engine.lease(queue.id, 100, 30_000, DeliveryPolicy(3, None)))
        elif command == "ack":
            policy = DeliveryPolicy(3, None)
            leased = cv.engine.lease(queue.id, int(args[0]), 30_000, policy)
            answer = cv.engine.settle(queue.id, [m.lease_id for m in leased], [], policy).acked
        elif command == "die-after-commit":

            def die(store: SnapshotStore) -> bool:
                os.kill(os.getpid(), signal.SIGKILL)
                return False

            SnapshotStore.publish = die  # type: ignore[method-assign]
            queue.update(delivery_delay=int(args[0]))
            answer = "survived"
        else:
            answer = f"unknown command {command!r}"
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
