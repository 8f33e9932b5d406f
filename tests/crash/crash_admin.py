"""An admin process for the crash tests: catalog writes in a loop, each printed (flushed) once done.

Usage: ``crash_admin.py DATA_DIR FIRST``. For k = FIRST, FIRST + 1, ...: create queue ``q{k}`` with
``delivery_delay = k % 100``, change it to ``k % 100 + 1``, then print ``k``. Every catalog write
also republishes the catalog snapshot, so kills land between commits and publications too.
"""

from __future__ import annotations

import itertools
import sys

import conveyor


def main() -> None:
    data_dir, first = sys.argv[1], int(sys.argv[2])
    cv = conveyor.connect(f"sqlite://{data_dir}")
    for k in itertools.count(first):
        queue = cv.create_queue(f"q{k}", delivery_delay=k % 100)
        queue.update(delivery_delay=k % 100 + 1)
        print(k, flush=True)


if __name__ == "__main__":
    main()
