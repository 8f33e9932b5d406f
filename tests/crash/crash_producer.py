"""A producer process for the crash test: threads calling ``send_batch`` of 100 in a loop, printing
each batch's number (flushed) as soon as its send returned, until the process is killed.

Usage: ``crash_producer.py DATA_DIR QUEUE FIRST_BATCH THREADS``. Thread ``t`` sends batches
``FIRST_BATCH + t``, ``FIRST_BATCH + t + THREADS``, ...; message ``i`` of batch ``b`` has body
``{"b": b, "i": i, ...}``. Several threads make sends share group commits, so kills land inside
commits of several batches at once.
"""

from __future__ import annotations

import sys
import threading

import conveyor

BATCH_SIZE = 100
# Some weight per message, so a batch spans several database pages.
PADDING = "x" * 300


def produce(queue: conveyor.Queue, first: int, step: int, printed: threading.Lock) -> None:
    batch = first
    while True:
        queue.send_batch([{"body": {"b": batch, "i": i, "padding": PADDING}} for i in range(BATCH_SIZE)])
        with printed:
            print(batch, flush=True)
        batch += step


def main() -> None:
    data_dir, queue_name, first, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    queue = conveyor.connect(f"sqlite://{data_dir}").queue(queue_name)
    printed = threading.Lock()
    for t in range(threads):
        threading.Thread(target=produce, args=(queue, first + t, threads, printed), daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    main()
