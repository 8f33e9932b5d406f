"""A process that puts one object and is SIGKILLed (by the storage's fault hook) after the object's
row and its notification's outbox row commit, before the notification is sent.

    python crash_put.py URL BUCKET KEY
"""

from __future__ import annotations

import sys

import conveyor


def main() -> None:
    url, bucket, key = sys.argv[1:4]
    cv = conveyor.connect(url)
    cv.bucket(bucket).put(key, b"written before the crash")
    print("the fault hook did not fire", flush=True)


if __name__ == "__main__":
    main()
